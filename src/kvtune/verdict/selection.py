"""Which shortlisted config to put to the test: a ranking-and-selection stage sized by the noise.

The search measures each config once, so among several configs better than the defaults its
ranking is mostly noise: the one it tops is often a +5% config that the proof then cannot show
(issue 40: some better config named in 70% of studies at 20 trials, the +20% one in 40%). So the
shortlisted leaders are screened in rounds, one fresh run each per round, and after each round a
leader is set aside once the best of them is ahead of it by more than `ELIMINATION_Z` standard
errors of the difference (the noise pooled from every config's repeated runs). Screening stops
when one leader is left, when the standard error of a difference between the leaders left is
small enough that they are within `policy.margin` (5%) of each other at that confidence, or after
`policy.screen_rounds` rounds. The noise sizes it: at 5% run-to-run noise one or two rounds
settle it, at 10% the rounds run out more often (docs/verdicts.md states what each budget
reaches).

The selection stays outside the test: the screening runs choose, only the proof runs measured
after the choice prove (verdict/engine.py), so no multiplicity correction is needed however many
rounds the selection took.
"""

from __future__ import annotations

import math
from typing import Sequence

from kvtune.verdict.evidence import Evidence, Goal, Policy, Role, Run
from kvtune.verdict.stats import mean, variance

# One-sided 90% per comparison: a leader truly as good as the best is set aside in at most one
# round in ten, and a +5% one behind a +20% one (13% apart in logs) within a few rounds at 10% noise.
ELIMINATION_Z = 1.2816


def _logs(ev: Evidence, number: int, goal: Goal) -> list[float]:
    """Signed log objectives of a config's search and screening runs (higher is better)."""
    sign = 1.0 if goal.maximize else -1.0
    runs: list[Run] = [*ev.of(number, Role.SEARCH), *ev.of(number, Role.SCREEN)]
    return [sign * math.log(r.objective) for r in runs if r.usable and r.objective is not None]


def noise(ev: Evidence, goal: Goal, numbers: Sequence[int]) -> float | None:
    """The run-to-run spread of log figures, pooled over `numbers` and the defaults (every config
    measured more than once); None before any config was."""
    groups = [_logs(ev, n, goal) for n in numbers]
    base = ev.baseline
    if base is not None:
        sign = 1.0 if goal.maximize else -1.0
        runs = [*ev.of(base.number, Role.SEARCH), *ev.of(base.number, Role.PROOF)]
        groups.append([sign * math.log(r.objective) for r in runs if r.usable and r.objective is not None])
    dof = sum(len(g) - 1 for g in groups if len(g) > 1)
    if dof < 1:
        return None
    return math.sqrt(sum((len(g) - 1) * variance(g) for g in groups if len(g) > 1) / dof)


def contenders(ev: Evidence, goal: Goal, shortlist: Sequence[int]) -> list[int]:
    """The shortlisted configs still in the running: none of their screening runs failed, and the
    leader (best mean of search and screening runs) is not ahead of them by more than
    `ELIMINATION_Z` standard errors of the difference."""
    alive = [n for n in shortlist if not any(r.failed for r in ev.of(n, Role.SCREEN))]
    logs = {n: _logs(ev, n, goal) for n in alive}
    alive = [n for n in alive if logs[n]]
    sd = noise(ev, goal, alive)
    if sd is None or len(alive) < 2:
        return alive
    means = {n: mean(logs[n]) for n in alive}
    leader = max(alive, key=lambda n: means[n])
    return [
        n
        for n in alive
        if means[leader] - means[n] <= ELIMINATION_Z * sd * math.sqrt(1 / len(logs[n]) + 1 / len(logs[leader]))
    ]


def next_screen(ev: Evidence, goal: Goal, policy: Policy, shortlist: Sequence[int]) -> int | None:
    """The shortlisted config to screen next, or None when the choice is made. Every leader gets
    one screening run first (the search's figure alone is biased up for the leader); then the
    contenders are screened round by round, the one with the fewest screening runs first."""
    if len(shortlist) < 2:
        return None
    for number in shortlist:
        if not any(r.usable or r.failed for r in ev.of(number, Role.SCREEN)):
            return number
    left = contenders(ev, goal, shortlist)
    if len(left) < 2:
        return None
    screened = {n: sum(1 for r in ev.of(n, Role.SCREEN) if r.usable) for n in left}
    fewest = min(screened.values())
    if fewest >= policy.screen_rounds:
        return None
    sd = noise(ev, goal, left)
    runs = min(len(_logs(ev, n, goal)) for n in left)
    if sd is not None and ELIMINATION_Z * sd * math.sqrt(2 / runs) <= math.log1p(policy.margin):
        return None  # the leaders left are within the margin of each other at this confidence
    return next(n for n in left if screened[n] == fewest)
