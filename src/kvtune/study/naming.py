"""Naming the best config on evidence, not on one number.

The named best must have held on a fresh server when a confirmation phase ran: among the
configs re-measured and still feasible, `objectives.evidence.choose_named_best` compares means
over both measurements with their noise (ties go to the defaults, then to fewer flags changed).
Only when no re-measured config held (or confirmation is off) is a config named on its single
measurement, and the reason says so. `comparison_metrics` gives the best and the baseline the
same number of measurements for the best-versus-baseline table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from kvtune.kinds import Direction
from kvtune.objectives.evidence import Candidate as Evidence
from kvtune.objectives.evidence import choose_named_best, estimate, simplicity
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import rank


@dataclass
class Naming:
    best: TrialOutcome | None
    why: str
    tied_with: list[int] = field(default_factory=list)
    remeasured: bool = False  # the named best held on a fresh server

    def to_dict(self) -> dict:
        return {"trial": self.best.number if self.best else None, "why": self.why,
                "tied_with": self.tied_with, "remeasured": self.remeasured}


def objective_values(o: TrialOutcome) -> list[float]:
    """The objective from every measurement of `o`: the first, and the confirmation's."""
    values = [o.objective] if o.objective is not None else []
    again = (o.confirmation or {}).get("objective")
    return values + ([float(again)] if again is not None else [])


def headline(o: TrialOutcome) -> str:
    """``136.6 +/- 9.7`` over every measurement of `o` (or ``... (measured once)``)."""
    values = objective_values(o)
    return estimate(values).format() if values else "-"


def name_best(outcomes: Sequence[TrialOutcome], direction: Direction | str) -> Naming:
    ranked = rank(list(outcomes), Direction(direction))
    if not ranked:
        return Naming(None, "no feasible config")
    confirmed = [o for o in ranked if o.confirmation is not None]
    if not confirmed:
        ran = any(o.confirmation is not None for o in outcomes)
        why = ("no re-measured config held on a fresh server: named on its one measurement" if ran
               else "measured once (no confirmation phase)")
        return Naming(ranked[0], why)
    decision = choose_named_best(
        [Evidence(o.number, objective_values(o), simplicity(o.candidate.flags), o.baseline)
         for o in confirmed], direction)
    best = next(o for o in confirmed if o.number == decision.number)
    return Naming(best, decision.why, decision.tied_with, remeasured=True)


def comparison_metrics(best: TrialOutcome, baseline: TrialOutcome) -> tuple[dict, dict, int]:
    """Metrics for best vs baseline from the same number of measurements on both sides: the
    mean of first and re-measurement when both were re-measured, else the first ones."""
    both = [o for o in (best, baseline) if (o.confirmation or {}).get("metrics")]
    if len(both) == 2 and best is not baseline:
        return _mean_metrics(best), _mean_metrics(baseline), 2
    return dict(best.metrics or {}), dict(baseline.metrics or {}), 1


def _mean_metrics(o: TrialOutcome) -> dict:
    assert o.confirmation is not None  # callers pass confirmed outcomes only
    first, again = o.metrics or {}, o.confirmation["metrics"]
    return {k: (v + again[k]) / 2 for k, v in first.items()
            if isinstance(v, (int, float)) and isinstance(again.get(k), (int, float))}
