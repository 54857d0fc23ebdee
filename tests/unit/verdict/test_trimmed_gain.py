"""The gain's trimmed test (issue 40 §1): the candidate's best run and the defaults' worst are set
aside, with critical values that hold alpha even when one of them is an unbounded outlier."""

from __future__ import annotations

import math

import numpy as np

from kvtune.testing import verdict_sim as sim
from kvtune.verdict import OBJECTIVE, Config, DecisionKind, Done, Evidence, Goal, Policy, Role, Run, next_step
from kvtune.verdict.boundaries import Statistic, boundary, critical_values, spent, spent_late
from kvtune.verdict.stats import compare, trimmed

GOAL = Goal(maximize=True)
POLICY = Policy(cap=6, every=3, screen=1)


def test_trimming_sets_aside_the_candidates_best_and_the_defaults_worst_in_the_goals_direction():
    up = trimmed([100, 150, 101], [99, 60, 100], maximize=True)
    assert up == compare([100, 101], [99, 100])
    down = trimmed([100, 50, 101], [99, 160, 100], maximize=False)
    assert down == compare([100, 101], [99, 100])
    assert trimmed([100, 101], [99, 100, 98], maximize=True) is None  # one run left: no spread


def test_late_spending_spends_all_of_alpha_at_the_cap_and_little_at_the_first_look():
    assert math.isclose(spent_late(0.04, 1.0), 0.04, rel_tol=1e-9)
    assert spent_late(0.04, 0.0) == 0.0
    assert spent_late(0.04, 1 / 3) < 0.001 < spent(0.04, 1 / 3)


def test_the_trimmed_boundaries_hold_alpha_with_one_unbounded_outlier_on_either_arm():
    cs = critical_values(Statistic.TRIMMED, 9, 3, 0.04)
    assert cs[0] > cs[1] > cs[2]
    rng = np.random.default_rng(40)
    for side in ("candidate", "defaults"):
        a, b = rng.standard_normal((20_000, 9)), rng.standard_normal((20_000, 9))
        (a if side == "candidate" else b)[:, 1] += 100.0 if side == "candidate" else -100.0
        crossed = np.zeros(20_000, dtype=bool)
        for n, c in zip((3, 6, 9), cs):
            for i in np.flatnonzero(~crossed):
                g = trimmed(np.exp(a[i, :n]).tolist(), np.exp(b[i, :n]).tolist(), maximize=True)
                crossed[i] = g is not None and g.t() > c
        assert crossed.mean() <= 0.045, (side, crossed.mean())


def run(config: int, role: Role, value: float) -> Run:
    return Run(config, role, {OBJECTIVE: value})


def test_one_lucky_candidate_run_that_named_a_config_under_the_untrimmed_t_names_nothing_now():
    # nothing differs: both arms drawn at 10% noise; the candidate's second run is a lucky 122
    w, d = [102, 122, 98, 110, 100, 106], [94, 87, 98, 91, 110, 92]
    old = compare(w, d)
    assert old is not None and old.t() > boundary(Statistic.TWO_SAMPLE, 6, 6, 3, 0.04)  # the old rule: a win
    configs = (Config(0, baseline=True), Config(1, flags_changed=1))
    ev = Evidence(configs, (run(0, Role.SEARCH, 100), run(1, Role.SEARCH, 110)))
    figures = {0: list(d), 1: list(w)}
    for _ in range(20):
        step = next_step(ev, GOAL, POLICY)
        if isinstance(step, Done):
            break
        ev = ev.with_run(run(step.config, step.role, figures[step.config].pop(0)))
    assert isinstance(step, Done)
    assert step.verdict.counted.pairs == 6 and not step.verdict.kind.changes_flags
    assert step.verdict.kind is DecisionKind.NOT_ENOUGH_EVIDENCE


def test_one_undetected_x1_5_outlier_among_the_candidates_proof_runs_keeps_false_wins_under_5_percent():
    rng = np.random.default_rng(41)
    verdicts = [sim.simulate(sim.null(6), 0.20, rng, outlier=1.5, outlier_side="candidate") for _ in range(2000)]
    rate = sim.false_wins(verdicts)
    assert rate.rate <= 0.05, rate.text()
