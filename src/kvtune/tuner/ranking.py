"""Ranking trial outcomes: which feasible configs are best, before and after confirmation.

Pure and import-free so the tuner, the artifacts and the CLI can all share it.
"""

from __future__ import annotations

from typing import Any


def rank(outcomes: list[Any], direction: str, confirmed: bool = True) -> list[Any]:
    """Feasible, measured (not duplicate) trials, best first. With `confirmed`, by the averaged
    score and only those whose re-measurement held."""
    ok = [o for o in outcomes if o.feasible and o.objective is not None and o.duplicate_of is None
          and (o.held or not confirmed)]
    key = (lambda o: o.score) if confirmed else (lambda o: o.objective)
    return sorted(ok, key=key, reverse=(direction == "maximize"))


def pareto(outcomes: list[Any], directions: list[str]) -> list[Any]:
    """Feasible measured trials that no other feasible trial beats on every objective at once
    (ordered by the first objective, best first)."""
    ok = [o for o in outcomes if o.feasible and o.duplicate_of is None and o.held
          and len(o.objectives) == len(directions) and None not in o.objectives]
    sign = [1.0 if d == "maximize" else -1.0 for d in directions]

    def dominates(a: Any, b: Any) -> bool:
        pa = [s * v for s, v in zip(sign, a.objectives)]
        pb = [s * v for s, v in zip(sign, b.objectives)]
        return all(x >= y for x, y in zip(pa, pb)) and any(x > y for x, y in zip(pa, pb))

    front = [o for o in ok if not any(dominates(other, o) for other in ok if other is not o)]
    return sorted(front, key=lambda o: o.objectives[0], reverse=(directions[0] == "maximize"))
