"""Issue 28's contract, held on simulated studies through the real verdict code (seeded, so the
figures are the same on every run; benchmarks/verdicts.py prints the whole table)."""

from __future__ import annotations

import numpy as np

from kvtune.testing import verdict_sim as sim
from kvtune.verdict import Policy

STUDIES = 2000


def test_false_wins_stay_under_5_percent_when_nothing_beats_the_defaults():
    rng = np.random.default_rng(28)
    verdicts = [sim.simulate(sim.null(20), 0.10, rng, drift=0.1) for _ in range(STUDIES)]
    rate = sim.false_wins(verdicts)
    assert rate.rate <= 0.05, rate.text()


def test_one_undetected_outlier_in_the_defaults_does_not_lift_false_wins_past_5_percent():
    rng = np.random.default_rng(29)
    verdicts = [sim.simulate(sim.null(6), 0.20, rng, outlier=0.5) for _ in range(STUDIES)]
    rate = sim.false_wins(verdicts)
    assert rate.rate <= 0.05, rate.text()


def test_a_true_20_percent_gain_is_found_in_most_studies():
    rng = np.random.default_rng(30)
    verdicts = [sim.simulate(sim.needle(6, 0.2), 0.10, rng) for _ in range(500)]
    assert sim.found(verdicts, {1}).rate >= 0.8


def test_a_latency_target_at_its_bound_is_rarely_passed_and_a_clear_one_usually():
    goal = sim.latency_goal(0.7)
    policy = Policy(cap=3, every=3, screen=1)
    rng = np.random.default_rng(31)
    at_bound = [sim.simulate(sim.latency(6, 0.7), 0.10, rng, policy=policy, goal=goal) for _ in range(STUDIES)]
    assert sim.false_wins(at_bound).rate <= 0.05
    clear = [sim.simulate(sim.latency(6, 0.5), 0.10, rng, policy=policy, goal=goal) for _ in range(500)]
    assert sim.found(clear, {1, 2, 3, 4, 5}).rate >= 0.9
