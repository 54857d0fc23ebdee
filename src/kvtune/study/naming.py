"""Naming the best config on evidence, not on one number, and the figures that say so.

The named best must have held on a fresh server when a confirmation phase ran: among the
configs re-measured and still feasible, `objectives.evidence.choose_named_best` compares them on
their re-measurements, with the study's pooled noise (`study.noise`); ties go to the defaults,
then to fewer flags changed from the server's own defaults (`server_defaults`, recorded in
results.json, so `kvtune show` and the report name the same best as the run). Only when no
re-measured config held (or confirmation is off) is a config named on its single measurement,
and the reason says so.

A single-objective confirmation is decided by the verdict (src/kvtune/verdict/), stored in the
study and attached to the trials it compared (`TrialOutcome.verdict`); when there is
one, it names the best (or nothing, when no config meets the targets) and its reason is the
verdict's, so every reader of results.json names what the run decided.

Why re-measurements only: the best's first measurement was the maximum over every trial of the
search, so it is biased up (the winner's curse); a re-measurement on a fresh server is not.
`figure` and `headline` therefore show a confirmed config's re-measured figure and label the
first one as selected; `comparison_metrics` compares the best and the baseline on their
re-measurements when both have one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kvtune.kinds import Direction
from kvtune.objectives.named_best import ConfirmedConfig as Evidence
from kvtune.objectives.named_best import Estimate, choose_named_best, estimate
from kvtune.objectives.noise import PRIOR, Noise
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import rank
from kvtune.study.verdict_evidence import flags_changed, stored_verdict
from kvtune.verdict import DecisionKind, Verdict

FIRST_SELECTED = "first measurement (selected, biased up)"
FIRST = "first measurement"
REMEASURED = "re-measured"


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


def objective_values(o: TrialOutcome) -> list[float]:
    """The objective from every measurement of `o`: the first, and the confirmation's."""
    values = [o.objective] if o.objective is not None else []
    again = (o.confirmation or {}).get("objective")
    return values + ([float(again)] if again is not None else [])


def unbiased_values(o: TrialOutcome) -> list[float]:
    """The objective values a decision rests on: the re-measurement when there is one (the first
    measurement of a config the search selected is biased up), else the first."""
    again = (o.confirmation or {}).get("objective")
    if again is not None:
        return [float(again)]
    return [o.objective] if o.objective is not None else []


@dataclass(frozen=True)
class Figure:
    """The headline figure of one config: its estimate, which measurements it is (`label`),
    the noise its +/- comes from, and the first measurement when the estimate is not it."""

    estimate: Estimate
    label: str
    noise: Noise
    first: float | None = None
    inconsistent: bool = False

    def text(self) -> str:
        """``48.1 +/- 9.4 (pooled noise 10.0%, 3 dof), re-measured; first measurement 49 (selected,
        biased up)``: every +/- says its source, every figure which measurement it is."""
        out = f"{self.estimate.format(self.noise)}, {self.label}"
        if self.first is not None:
            out += f"; first measurement {self.first:.4g} (selected, biased up)"
        if self.inconsistent:
            out += "; the two measurements are inconsistent beyond the noise (re-measure, do not average)"
        return out


def figure(o: TrialOutcome, noise: Noise = PRIOR) -> Figure | None:
    """`o`'s headline figure: re-measured when it was, else its first measurement, labelled as
    selected (biased up) unless it is the baseline (always run, never selected)."""
    again = (o.confirmation or {}).get("objective")
    if again is not None:
        first = o.objective if o.objective is not None and not o.baseline else None
        return Figure(estimate([float(again)]), REMEASURED, noise, first, noise.is_inconsistent(o.number))
    if o.objective is None:
        return None
    return Figure(estimate([o.objective]), FIRST if o.baseline else FIRST_SELECTED, noise)


def headline(o: TrialOutcome, noise: Noise = PRIOR) -> str:
    """The figure's text (or ``-`` when `o` has no objective value)."""
    f = figure(o, noise)
    return f.text() if f is not None else "-"


def name_best(
    outcomes: Sequence[TrialOutcome],
    direction: Direction | str,
    defaults: Mapping[str, Any] | None = None,
    noise: Noise = PRIOR,
) -> Naming:
    """The named best. `defaults`: the server's default flag values (``env:NAME`` for
    environment variables; None: unknown, every given flag counts as a change); `noise`: the
    study's pooled noise on the objective (`study.noise.noise_of`)."""
    decided = verdict_naming(outcomes)
    if decided is not None:
        return decided
    # a measurement that stayed disturbed (the machine was busy with something else) is no evidence
    ranked = rank([o for o in outcomes if not o.disturbed or _clean_confirmation(o)], Direction(direction))
    if not ranked:
        return Naming(None, "no feasible config")
    confirmed = [o for o in ranked if _clean_confirmation(o)]
    if not confirmed:
        ran = any(o.confirmation is not None for o in outcomes)
        why = (
            "no re-measured config held on a fresh server: named on its one measurement"
            if ran
            else "no confirmation phase: named on its one measurement"
        )
        return Naming(ranked[0], why)
    decision = choose_named_best(
        [Evidence(o.number, unbiased_values(o), flags_changed(o, defaults), o.baseline) for o in confirmed],
        direction,
        noise,
    )
    best = next(o for o in confirmed if o.number == decision.number)
    return Naming(best, decision.why, decision.tied_with, remeasured=True)


def verdict_naming(outcomes: Sequence[TrialOutcome]) -> Naming | None:
    """What the stored verdict names (None: no verdict, e.g. several objectives, an older study,
    no confirmation). A verdict that keeps no config (nothing meets the targets) names none."""
    verdict = stored_verdict(outcomes)
    if verdict is None:
        return None
    best = next((o for o in outcomes if o.number == verdict.named), None)
    tied = [verdict.candidate] if verdict.kind is DecisionKind.TIED and verdict.candidate is not None else []
    remeasured = best is not None and best.confirmation is not None
    return Naming(best, verdict.reason, tied, remeasured=remeasured, verdict=verdict)


def _clean_confirmation(o: TrialOutcome) -> bool:
    """`o` was re-measured and the re-measurement was not disturbed."""
    return o.confirmation is not None and not o.confirmation.get("disturbed")


def comparison_metrics(best: TrialOutcome, baseline: TrialOutcome) -> tuple[dict, dict, int]:
    """Metrics for best vs baseline, one measurement each, from the same phase: both
    re-measurements when both were re-measured (fresh servers, close in time, neither selected
    as a maximum), else both first measurements. The int is the measurements per side (1)."""
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
    return "first measurements, 1 each (the best's was selected as the maximum: biased up)"
