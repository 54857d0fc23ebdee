"""The ranking-and-selection stage among the shortlisted leaders (issue 40 §2): rounds of one
fresh run each, leaders clearly behind set aside, stopped by the measured noise."""

from __future__ import annotations

import numpy as np

from kvtune.testing import verdict_sim as sim
from kvtune.verdict import OBJECTIVE, Config, Evidence, Goal, Measure, Policy, Role, Run, next_step
from kvtune.verdict.selection import contenders, next_screen, noise

GOAL = Goal(maximize=True)
CONFIGS = (Config(0, baseline=True), *(Config(i, flags_changed=1) for i in range(1, 4)))


def run(config: int, role: Role, value: float) -> Run:
    return Run(config, role, {OBJECTIVE: value})


def evidence(*runs: tuple[int, Role, float]) -> Evidence:
    return Evidence(CONFIGS, tuple(run(*r) for r in runs))


SEARCHED = [(0, Role.SEARCH, 100.0), (1, Role.SEARCH, 130.0), (2, Role.SEARCH, 125.0), (3, Role.SEARCH, 120.0)]


def test_every_leader_is_screened_once_before_anyone_is_set_aside():
    ev = evidence(*SEARCHED, (0, Role.PROOF, 100.0))
    policy = Policy(screen=3, screen_rounds=3)
    assert next_step(ev, GOAL, policy) == Measure(1, Role.SCREEN)
    ev = ev.with_run(run(1, Role.SCREEN, 128.0))
    assert next_screen(ev, GOAL, policy, [1, 2, 3]) == 2


def test_a_leader_clearly_behind_at_the_measured_noise_is_set_aside_and_the_close_ones_screened_again():
    # about 8% noise (trial 1: 130 then 118); trial 3 measured 120 then 80: far behind
    ev = evidence(
        *SEARCHED,
        (0, Role.PROOF, 92.0),
        (1, Role.SCREEN, 118.0),
        (2, Role.SCREEN, 127.0),
        (3, Role.SCREEN, 80.0),
    )
    sd = noise(ev, GOAL, [1, 2, 3])
    assert sd is not None and 0.05 < sd < 0.3
    assert contenders(ev, GOAL, [1, 2, 3]) == [1, 2]
    policy = Policy(screen=3, screen_rounds=3)
    assert next_step(ev, GOAL, policy) == Measure(1, Role.SCREEN)
    ev = ev.with_run(run(1, Role.SCREEN, 140.0))
    assert next_step(ev, GOAL, policy) == Measure(2, Role.SCREEN)
    ev = ev.with_run(run(2, Role.SCREEN, 112.0))
    assert contenders(ev, GOAL, [1, 2, 3]) == [1, 2]  # still too close to call at this noise
    assert next_screen(ev, GOAL, policy, [1, 2, 3]) == 1  # round 3 of 3


def test_screening_stops_at_its_rounds_and_when_the_noise_already_settles_the_5_percent_question():
    ev = evidence(
        *SEARCHED,
        (0, Role.PROOF, 92.0),
        (1, Role.SCREEN, 118.0),
        (2, Role.SCREEN, 127.0),
        (3, Role.SCREEN, 80.0),
    )
    assert next_screen(ev, GOAL, Policy(screen=3, screen_rounds=1), [1, 2, 3]) is None
    # 1% noise: two leaders 4% apart are within 5% of each other already; nothing more to screen
    quiet = Evidence(
        CONFIGS,
        tuple(
            run(*r)
            for r in (
                (0, Role.SEARCH, 100.0),
                (1, Role.SEARCH, 125.0),
                (2, Role.SEARCH, 120.0),
                (0, Role.PROOF, 101.0),
                (1, Role.SCREEN, 124.0),
                (2, Role.SCREEN, 121.0),
            )
        ),
    )
    assert next_screen(quiet, GOAL, Policy(screen=2, screen_rounds=5), [1, 2]) is None


def test_a_failed_screening_run_takes_a_leader_out_of_the_running():
    ev = evidence(*SEARCHED, (0, Role.PROOF, 100.0), (1, Role.SCREEN, 128.0), (2, Role.SCREEN, 124.0))
    ev = ev.with_run(Run(3, Role.SCREEN, {}, failed="the server crashed"))
    assert 3 not in contenders(ev, GOAL, [1, 2, 3])


def test_among_several_better_configs_more_rounds_name_one_within_5_percent_of_the_best_more_often():
    def within(policy: Policy, seed: int) -> int:
        rng = np.random.default_rng(seed)
        hits = 0
        for _ in range(200):
            land = sim.several(20, rng)
            v = sim.simulate(land, 0.10, rng, policy=policy)
            hits += v.kind.changes_flags and land.objective[v.named or 0] * 1.05 >= max(land.objective)
        return hits

    one = within(Policy(screen=5, screen_rounds=1), 42)
    many = within(Policy(screen=5, screen_rounds=10), 42)
    assert many >= one + 20, (one, many)
