"""Naming the best config, and the figures that say what it rests on.

The verdict names the best (src/kvtune/verdict/, docs/verdicts.md), whatever the number of
objectives: the confirmation stores it in the study and attaches it to the trials it compared
(`TrialOutcome.verdict`), so every reader of results.json names what the run decided, with the
verdict's reason (or nothing, when no config meets the targets). Nothing else here decides.
Without a verdict (`--confirm-top 0`, a study whose confirmation has not run yet, a results.json
older than the verdict) the search's top config is named on its one measurement, and the reason
says that it is not confirmed.

`figure` and `headline` show a re-measured config's figure from its fresh runs and label the
first measurement as selected (biased up: the winner's curse); `comparison_metrics` compares the
best and the baseline on their re-measurements when both have one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from kvtune.kinds import Direction
from kvtune.study.measured_noise import PRIOR, Noise
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import rank
from kvtune.study.verdict_evidence import stored_verdict
from kvtune.verdict import DecisionKind, Verdict

FIRST_SELECTED = "search measurement (selected, biased up)"
FIRST = "search measurement"
REMEASURED = "re-measured"
NOT_CONFIRMED = "not confirmed: named on its one search measurement (the top of many noisy figures, biased up)"


@dataclass
class Naming:
    best: TrialOutcome | None
    why: str
    tied_with: list[int] = field(default_factory=list)
    remeasured: bool = False  # the named best held on a fresh server
    verdict: Verdict | None = None  # the confirmation's decision, when one ran

    def to_dict(self) -> dict:
        return {
            "trial": self.best.number if self.best else None,
            "why": self.why,
            "tied_with": self.tied_with,
            "remeasured": self.remeasured,
            "kind": self.verdict.kind.name if self.verdict else None,
        }


@dataclass(frozen=True)
class Figure:
    """The headline figure of one config: the mean of `n` measurements, which measurements they
    are (`label`), the noise its +/- comes from, and the first measurement when the figure is
    not it."""

    mean: float
    n: int
    label: str
    noise: Noise
    first: float | None = None
    inconsistent: bool = False

    @property
    def half_width(self) -> float:
        """The 95% +/- of the figure, from the study's noise (shown, never decided on)."""
        return self.noise.half_width(self.mean, self.n)

    def text(self) -> str:
        """``48.1 +/- 9.4 (pooled noise 10.0%, 3 dof), re-measured; search measurement 49 (selected,
        biased up)``: every +/- says its source, every figure which measurement it is."""
        out = f"{self.mean:.4g} +/- {self.half_width:.2g} ({self.noise.source()}), {self.label}"
        if self.n > 1:
            out += f" ({self.n} runs)"
        if self.first is not None:
            out += f"; search measurement {self.first:.4g} (selected, biased up)"
        if self.inconsistent:
            out += "; the two measurements are inconsistent beyond the noise (re-measure, do not average)"
        return out


def figure(o: TrialOutcome, noise: Noise = PRIOR) -> Figure | None:
    """`o`'s headline figure: its fresh runs' mean when it was re-measured, else its first
    measurement, labelled as selected (biased up) unless it is the baseline (never selected)."""
    again = o.fresh_objective
    if again is not None:
        n = int((o.confirmation or {}).get("valid_runs") or 1)
        first = o.objective if o.objective is not None and not o.baseline else None
        return Figure(again, max(n, 1), REMEASURED, noise, first, noise.is_inconsistent(o.number))
    if o.objective is None:
        return None
    return Figure(o.objective, 1, FIRST if o.baseline else FIRST_SELECTED, noise)


def headline(o: TrialOutcome, noise: Noise = PRIOR) -> str:
    """The figure's text (or ``-`` when `o` has no objective value)."""
    f = figure(o, noise)
    return f.text() if f is not None else "-"


def name_best(outcomes: Sequence[TrialOutcome], direction: Direction | str) -> Naming:
    """The named best: the stored verdict's; without one, the search's top config that held
    (its measurement undisturbed), said to be not confirmed."""
    decided = verdict_naming(outcomes)
    if decided is not None:
        return decided
    # a measurement that stayed disturbed (the machine was busy with something else) is no evidence
    ranked = rank([o for o in outcomes if not o.disturbed], Direction(direction))
    if not ranked:
        return Naming(None, "no feasible config")
    return Naming(ranked[0], NOT_CONFIRMED)


def verdict_naming(outcomes: Sequence[TrialOutcome]) -> Naming | None:
    """What the stored verdict names (None: no verdict: no confirmation, or an older study). A
    verdict that keeps no config (nothing meets the targets) names none."""
    verdict = stored_verdict(outcomes)
    if verdict is None:
        return None
    best = next((o for o in outcomes if o.number == verdict.named), None)
    tied = [verdict.candidate] if verdict.kind is DecisionKind.TIED and verdict.candidate is not None else []
    remeasured = best is not None and best.confirmation is not None
    return Naming(best, verdict.reason, tied, remeasured=remeasured, verdict=verdict)


def comparison_metrics(best: TrialOutcome, baseline: TrialOutcome) -> tuple[dict, dict, int]:
    """Metrics for best vs baseline, one figure each, from the same phase: both re-measurements
    (the means of their fresh runs) when both were re-measured (fresh servers, close in time,
    neither selected as a maximum), else both first measurements. The int is the figures per side
    (1)."""
    best_again = (best.confirmation or {}).get("metrics")
    baseline_again = (baseline.confirmation or {}).get("metrics")
    if best_again and baseline_again and best is not baseline:
        return dict(best_again), dict(baseline_again), 1
    return dict(best.metrics or {}), dict(baseline.metrics or {}), 1


def comparison_basis(best: TrialOutcome, baseline: TrialOutcome) -> str:
    """Which measurements `comparison_metrics` compared, as the tables say it."""
    both = [o for o in (best, baseline) if (o.confirmation or {}).get("metrics")]
    if len(both) == 2 and best is not baseline:
        return "re-measured on fresh servers, 1 measurement each"
    return "search measurements, 1 each (the best's was selected as the maximum: biased up)"
