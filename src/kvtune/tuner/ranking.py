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
