"""Ranking trial outcomes: which feasible configs lead, on the search's figures or on fresh ones.

The one definition of "ranked" and of "Pareto set", shared by the tuner (what the confirmation
re-measures), results.json and every reader of it (`kvtune show`, the report, `export`), so they
can never list different trials. The search's first measurement of a config selects (it is the
maximum of many noisy figures for the config it put on top); only fresh re-measurements are
compared once there are some, and the two are never averaged. Pure: outcomes and directions in,
ordered outcomes out.
"""

from __future__ import annotations

from typing import Callable, Sequence

from kvtune.kinds import Direction
from kvtune.study.outcome import TrialOutcome

Values = Callable[[TrialOutcome], Sequence[float | None]]


def rank(outcomes: Sequence[TrialOutcome], direction: Direction, confirmed: bool = True) -> list[TrialOutcome]:
    """Feasible, measured (not duplicate) trials, best first by the search's measurement. With
    `confirmed`, only those not shown to fail on fresh servers (`TrialOutcome.held`)."""
    ok = [
        o
        for o in outcomes
        if o.feasible and o.objective is not None and o.duplicate_of is None and (o.held or not confirmed)
    ]
    return sorted(ok, key=lambda o: _number(o.objective), reverse=Direction(direction) is Direction.MAXIMIZE)


def rank_fresh(outcomes: Sequence[TrialOutcome], direction: Direction) -> list[TrialOutcome]:
    """The trials re-measured on fresh servers that held there, best first by the mean of their
    fresh runs alone (`TrialOutcome.fresh_objective`)."""
    ok = [o for o in rank(outcomes, direction) if o.fresh_objective is not None]
    return sorted(ok, key=lambda o: _number(o.fresh_objective), reverse=Direction(direction) is Direction.MAXIMIZE)


def _number(value: float | None) -> float:
    assert value is not None  # the trials without one were left out
    return value


def fresh_points(o: TrialOutcome) -> Sequence[float | None]:
    """A trial's objectives on fresh servers alone ([] when it was not re-measured)."""
    return o.fresh_objectives


def pareto(
    outcomes: Sequence[TrialOutcome], directions: Sequence[Direction], values: Values | None = None
) -> list[TrialOutcome]:
    """Feasible measured trials that held, which no other such trial beats on every objective at
    once (ordered by the first objective, best first; ties keep the order given). `values` reads
    the points; by default each trial's objectives on fresh servers alone (`fresh_points`), so a
    trial that was not re-measured is in no Pareto set a study reports: the search's figures
    select what is re-measured (`values=lambda o: o.objectives`), fresh ones make the set."""
    read = values or fresh_points
    dirs = [Direction(d) for d in directions]
    sign = [1.0 if d is Direction.MAXIMIZE else -1.0 for d in dirs]
    points = {}
    for o in outcomes:
        v = list(read(o))
        if o.feasible and o.duplicate_of is None and o.held and len(v) == len(dirs) and None not in v:
            points[o.number] = (o, [s * x for s, x in zip(sign, v) if x is not None])

    def dominates(a: list[float], b: list[float]) -> bool:
        return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))

    front = [o for n, (o, p) in points.items() if not any(dominates(q, p) for m, (_, q) in points.items() if m != n)]
    return sorted(front, key=lambda o: -points[o.number][1][0])
