"""The `Verdict`: the one decision a study ends with, as every surface reads it.

The run's summary, `kvtune show` (local or `--storage`), the report, results.json, `compare` and
the CSV all read this record (stored in the study, copied into results.json by `to_dict`) and
never decide again, so they cannot name different configs. It says which config to deploy
(`named`), what kind of decision that is, the effect of the tested candidate against the
defaults per metric with 95% intervals, how each target fared on fresh servers, the smallest
gain the evidence spent could have detected, and what was counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from kvtune.verdict.stats import POWER


class DecisionKind(str, Enum):
    BEATS_DEFAULTS = "beats the defaults"
    MEETS_WHERE_DEFAULTS_MISS = "meets the targets where the defaults miss"
    TIED = "tied with the defaults: the simpler config (the defaults) stays"
    NOT_ENOUGH_EVIDENCE = "not enough evidence at this budget: the defaults stay"
    CANDIDATE_FAILED = "the candidate did not hold on fresh servers: the defaults stay"
    DEFAULTS_ONLY = "only the defaults met the targets"
    NOTHING_MEETS = "nothing meets the targets"

    @property
    def changes_flags(self) -> bool:
        """Whether this decision deploys a config other than the defaults."""
        return self in (DecisionKind.BEATS_DEFAULTS, DecisionKind.MEETS_WHERE_DEFAULTS_MISS)


@dataclass(frozen=True)
class Effect:
    """The candidate over the defaults on one metric (a ratio; > 1: the candidate's figure is
    higher) with its 95% interval, from `n` proof runs per arm."""

    metric: str
    ratio: float
    low: float
    high: float
    n: int

    def text(self) -> str:
        """``-12.3% [-20.1%, -3.9%]``"""
        pct = [(x - 1) * 100 for x in (self.ratio, self.low, self.high)]
        return f"{pct[0]:+.1f}% [{pct[1]:+.1f}%, {pct[2]:+.1f}%]"


@dataclass(frozen=True)
class TargetCheck:
    """One target on one side (`who`: "candidate" or "defaults") over its proof runs: the
    figure (geometric mean, or mean for rates) with its 95% interval, the bound it was held to,
    and what the runs showed at the design's confidence: "met", "missed" or "unclear"."""

    target: str
    who: str
    figure: float
    low: float
    high: float
    bound: float
    shown: str
    n: int
    unit: str = ""  # "ms" for latencies; rates and throughputs print bare
    # the two-sided confidence of [low, high]: the test's own interval (verdict/target_checks.py),
    # which clears the bound exactly when the test passes; None: a rate's range of runs, or no
    # spread to state one from
    confidence: float | None = None

    def text(self) -> str:
        """``tpot_p95<40ms: 32.5 ms [27.1, 39.0] against 40 ms (the test's 92% interval)``
        (whether it was met is `shown`)"""
        u = f" {self.unit}" if self.unit else ""
        which = f" (the test's {self.confidence:.0%} interval)" if self.confidence is not None else ""
        return (
            f"{self.target}: {_fmt(self.figure)}{u} [{_fmt(self.low)}, {_fmt(self.high)}] "
            f"against {_fmt(self.bound)}{u}{which}"
        )


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


@dataclass(frozen=True)
class Counted:
    """The evidence a verdict rests on: proof runs per arm, screening runs, disturbed runs
    measured again, and the looks taken."""

    pairs: int = 0
    screened: int = 0
    disturbed: int = 0
    looks: int = 0


@dataclass(frozen=True)
class Verdict:
    kind: DecisionKind
    named: int | None  # the trial to deploy (the baseline's number when the defaults stay)
    reason: str  # one sentence for people; code reads the fields, never this
    candidate: int | None = None  # the config tested against the defaults
    baseline: int | None = None
    shortlist: tuple[int, ...] = ()
    effects: tuple[Effect, ...] = ()
    targets: tuple[TargetCheck, ...] = ()
    mde: float | None = None  # smallest gain 80% detectable with the evidence spent (ratio - 1)
    noise: float | None = None  # the proof's pooled SD of log objective (~ its CV)
    alpha: float = 0.04
    counted: Counted = field(default_factory=Counted)
    objective: str = "objective"

    def effect(self, metric: str) -> Effect | None:
        return next((e for e in self.effects if e.metric == metric), None)

    def detectable_text(self) -> str:
        """``the smallest gain this budget could detect: +18% (80% power, 5% false wins)``"""
        if self.mde is None:
            return "the smallest detectable gain could not be estimated (too few runs)"
        return (
            f"the smallest gain this evidence could detect: {self.mde * 100:+.0f}% "
            f"({POWER * 100:.0f}% power, {self.alpha * 100:.0f}% false wins)"
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind.name
        out["kind_text"] = self.kind.value
        out["shortlist"] = list(self.shortlist)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        return cls(
            kind=DecisionKind[d["kind"]],
            named=d.get("named"),
            reason=str(d.get("reason") or ""),
            candidate=d.get("candidate"),
            baseline=d.get("baseline"),
            shortlist=tuple(d.get("shortlist") or ()),
            effects=tuple(Effect(**e) for e in d.get("effects") or ()),
            targets=tuple(TargetCheck(**t) for t in d.get("targets") or ()),
            mde=d.get("mde"),
            noise=d.get("noise"),
            alpha=float(d.get("alpha", 0.05)),
            counted=Counted(**(d.get("counted") or {})),
            objective=str(d.get("objective") or "objective"),
        )
