"""Ranking trial outcomes: which feasible configs are best, before and after confirmation.

The one definition of "best" and of "Pareto set", shared by the tuner (confirmation, the run
summary), results.json and every reader of it (`kvtune show`, the report, `export`), so they can
never name different trials. Pure: outcomes and directions in, ordered outcomes out.
"""

from __future__ import annotations

from typing import Callable, Sequence

from kvtune.kinds import Direction
from kvtune.study.outcome import TrialOutcome

Values = Callable[[TrialOutcome], Sequence[float | None]]


def rank(outcomes: Sequence[TrialOutcome], direction: Direction, confirmed: bool = True) -> list[TrialOutcome]:
    """Feasible, measured (not duplicate) trials, best first. With `confirmed`, by the averaged
    score and only those whose re-measurement held."""
    ok = [
        o
        for o in outcomes
        if o.feasible and o.objective is not None and o.duplicate_of is None and (o.held or not confirmed)
    ]
    key = (lambda o: o.score) if confirmed else (lambda o: o.objective)
    return sorted(ok, key=key, reverse=Direction(direction) is Direction.MAXIMIZE)


def pareto(
    outcomes: Sequence[TrialOutcome], directions: Sequence[Direction], values: Values | None = None
) -> list[TrialOutcome]:
    """Feasible measured trials that no other feasible trial beats on every objective at once
    (ordered by the first objective, best first; ties keep the order given). `values` reads the
    points (default: each outcome's objective values, averaged with its re-measurement when it
    was confirmed, one per direction)."""
    read = values or (lambda o: o.scores)
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
