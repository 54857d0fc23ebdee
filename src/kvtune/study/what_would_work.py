"""What would work, when nothing met the targets at the load asked: a "no" a user can act on.

Three answers, all from full measurements (an early stop's figures rest on the two or three
requests it heard before a target could no longer hold, so they are shown as stopped and never
used here):

- for each missed target, the best figure any config measured and the config that measured it
  (a target one config met alone, but never with the others, says so);
- the nearest config, by one stated rule (`NEAREST_RULE`): the smallest worst shortfall, each
  target's shortfall being how far its figure lies beyond the bound as a fraction of the bound
  (TTFT p95 2.7 s against 1 s is 170%); ties go to the smaller sum of shortfalls, then to the
  earlier trial;
- the load at which the targets hold on this box: the tuner's bounded capacity search on the
  nearest config below the load asked (tuner/load_search.py, one launch), recorded here as a
  `LoadFound`; or, when the run's budget left no room for it, the exact command that finds it.

The tuner picks the config to search with `nearest` and the summary, `kvtune show` and the
report print `lines` of the record results.json carries ("what_would_work"), so they agree.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from kvtune.errors import TargetError
from kvtune.kinds import FailureKind
from kvtune.objectives.metrics import LATENCY_METRICS
from kvtune.objectives.targets import RATE_METRICS, Target
from kvtune.study.outcome import TrialOutcome

NEAREST_RULE = (
    "the smallest worst shortfall (how far a figure lies beyond its bound, as a fraction of the "
    "bound), then the smallest sum of shortfalls, among configs measured in full"
)


def current_metrics(o: TrialOutcome) -> dict:
    """The figures a miss is judged on: a config that failed its re-measurement by the
    re-measurement's (its first figures met every target, so they would suggest nothing)."""
    if o.feasible and not o.held:
        return dict((o.confirmation or {}).get("metrics") or {})
    return dict(o.metrics or {})


def fully_measured(outcomes: Sequence[TrialOutcome]) -> list[TrialOutcome]:
    """The trials whose figures are a full measurement: measured in their own right, not
    stopped early, not crashed mid-run (a crash keeps partial figures)."""
    return [o for o in outcomes if o.measured and not o.stopped_early and o.failure is not FailureKind.CRASHED]


def resolved_targets(targets: Sequence[Target], outcomes: Sequence[TrialOutcome]) -> list[Target]:
    """The targets with relative bounds set from the measured baseline (dropped when none ran)."""
    base = next((o.metrics for o in outcomes if o.baseline and o.measured), None) or {}
    out = []
    for t in targets:
        try:
            out.append(t.resolve(base))
        except TargetError:
            continue
    return out


def shortfall(t: Target, metrics: dict) -> float:
    """How far `metrics` lie beyond `t`'s bound as a fraction of the bound: 0 when met."""
    if t.met(metrics):
        return 0.0
    v, bound = t.value(metrics), t.threshold
    if not math.isfinite(v):
        return math.inf
    if t.upper:
        return (v - bound) / abs(bound) if bound else math.inf
    return (bound - v) / abs(bound) if bound else math.inf


def nearest(outcomes: Sequence[TrialOutcome], targets: Sequence[Target]) -> TrialOutcome | None:
    """The config closest to meeting every target, by `NEAREST_RULE`; None when no config was
    measured in full. `targets`: resolved (`resolved_targets`)."""
    scored = []
    for o in fully_measured(outcomes):
        m = current_metrics(o)
        if not m:
            continue
        gaps = [shortfall(t, m) for t in targets]
        scored.append((max(gaps, default=0.0), sum(gaps), o.number, o))
    return min(scored, key=lambda s: s[:3])[3] if scored else None


def flags_text(o: TrialOutcome) -> str:
    """A config as its flags (``parallel=2 threads=4``), or the server's defaults."""
    c = o.candidate
    if o.baseline or (not c.flags and not c.env):
        return "the server's defaults"
    return " ".join([f"{k}={v}" for k, v in c.flags.items()] + [f"{k}={v}" for k, v in c.env.items()])


def figure_text(t: Target, v: float) -> str:
    """A target's figure in its unit: ``2.7 s``, ``850 ms``, ``3%``, ``41.2 tok/s``."""
    if not math.isfinite(v):
        return "none (no request answered)"
    if t.metric in LATENCY_METRICS:
        return f"{v / 1000:.3g} s" if v >= 1000 else f"{v:.3g} ms"
    if t.metric in RATE_METRICS:
        return f"{v * 100:.3g}%"
    return f"{v:.4g}"


@dataclass(frozen=True)
class BestFigure:
    """One missed target: the best full measurement of its figure, and which config took it."""

    target: str  # the target as described (`Target.describe`)
    figure: float | None  # in the metric's unit (ms, fraction, per second); None: no full measurement
    text: str  # the figure as people read it
    trial: int | None
    config: str
    met_alone: bool = False  # that config met this target, but not every other one

    def line(self) -> str:
        if self.trial is None:
            return f"{self.target}: no config was measured in full"
        alone = " (it met this target, but not every other one)" if self.met_alone else ""
        return f"{self.target}: best {self.text}, by trial {self.trial} ({self.config}){alone}"


@dataclass(frozen=True)
class LoadFound:
    """The bounded capacity search on the nearest config, below the load asked."""

    trial: int  # the nearest config's trial
    unit: str  # "users" or "req/s"
    asked: float  # the study's load, where the nearest config missed
    held: float  # the highest load that held (re-checked); 0: not even the lowest level
    lowest: float  # the lowest level the search measures (1 user, 0.5 req/s)
    levels: list[dict[str, Any]] = field(default_factory=list)  # load, status, recheck
    bounded: bool = False  # the level cap ended it before its resolution: `held` is a lower bound
    seconds: float = 0.0  # its wall time, start-up included (counted in the run's time)
    failed: str = ""  # why the search measured nothing (the server did not start, ...)
    disturbed: bool = False  # the machine's other load disturbed it, even when measured again
    targets: str = ""  # the targets it judged (a fidelity gate's answers do not move with the load)

    def line(self, targets: str) -> str:
        busy = "; disturbed by the machine's other load: run again when it is quiet" if self.disturbed else ""
        cost = f" (1 launch, {len(self.levels)} level(s), {self.seconds:.0f} s of the run's time{busy})"
        targets = self.targets or targets
        if self.failed:
            return f"Load that holds: not found, {self.failed}{cost}"
        if self.held <= 0:
            return (
                f"Load that holds: none on this box: trial {self.trial} misses {targets} even at "
                f"{self.load_text(self.lowest)} (asked: {self.asked:g}){cost}"
            )
        more = " or more (the level cap ended the search)" if self.bounded else ""
        return (
            f"Load that holds: trial {self.trial} meets {targets} at {self.load_text(self.held)}{more} "
            f"on this box (asked: {self.asked:g}){cost}"
        )

    def load_text(self, load: float) -> str:
        """``1 user``, ``3 users``, ``0.5 req/s``."""
        return "1 user" if self.unit == "users" and load == 1 else f"{load:g} {self.unit}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LoadFound":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class WhatWouldWork:
    """results.json's "what_would_work": the missed targets' best figures, the nearest config
    (by `NEAREST_RULE`) and the load that holds, or the command that finds it."""

    targets: str  # every target, described, joined
    missed: list[BestFigure] = field(default_factory=list)
    nearest: int | None = None
    nearest_config: str = ""
    nearest_shortfall: dict[str, float] = field(default_factory=dict)  # target -> fraction beyond
    rule: str = NEAREST_RULE
    load: LoadFound | None = None
    command: str = ""  # when no search ran: the exact command that would run it
    not_searched: str = ""  # why no search ran

    def lines(self) -> list[str]:
        out = ["What would work:"]
        out += [f"  {b.line()}" for b in self.missed]
        if self.nearest is None:
            out.append("  Nearest config: none (no config was measured in full)")
            return out
        gaps = ", ".join(f"{k} {_pct(v)} over" for k, v in self.nearest_shortfall.items() if v > 0)
        out.append(f"  Nearest config: trial {self.nearest} ({self.nearest_config}): {gaps or 'no target missed'}")
        out.append(f"    (nearest: {self.rule})")
        if self.load is not None:
            out.append(f"  {self.load.line(self.targets)}")
        elif self.command:
            out.append(f"  Load that holds: not searched ({self.not_searched}); to find it: {self.command}")
        elif self.not_searched:
            out.append(f"  Load that holds: not searched ({self.not_searched})")
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["load"] = self.load.to_dict() if self.load is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WhatWouldWork":
        values = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        values["missed"] = [BestFigure(**b) for b in d.get("missed") or []]
        values["load"] = LoadFound.from_dict(d["load"]) if d.get("load") else None
        return cls(**values)


def _pct(x: float) -> str:
    return "far" if not math.isfinite(x) else f"{x * 100:.0f}%"


def best_figures(
    outcomes: Sequence[TrialOutcome], targets: Sequence[Target], missed: Sequence[Target]
) -> list[BestFigure]:
    """For each of `missed`, the best full measurement of its figure and the config that took it."""
    full = [(o, current_metrics(o)) for o in fully_measured(outcomes)]
    out = []
    for t in missed:
        values = [(t.value(m), o) for o, m in full if m and math.isfinite(t.value(m))]
        if not values:
            out.append(BestFigure(t.describe(), None, "", None, ""))
            continue
        v, o = (min if t.upper else max)(values, key=lambda x: (x[0], x[1].number))
        met_alone = t.met(current_metrics(o))
        out.append(BestFigure(t.describe(), v, figure_text(t, v), o.number, flags_text(o), met_alone))
    return out


def what_would_work(
    outcomes: Sequence[TrialOutcome],
    targets: Sequence[Target],
    load: LoadFound | None = None,
    command: str = "",
    not_searched: str = "",
) -> WhatWouldWork:
    """The record for a study where nothing met the targets. A target is missed when the
    nearest config misses it or no full measurement met it; error-rate and fidelity targets
    are shown too (their best figure is still what the box did)."""
    resolved = resolved_targets(targets, outcomes)
    near = nearest(outcomes, resolved)
    m = current_metrics(near) if near is not None else {}
    full = [current_metrics(o) for o in fully_measured(outcomes)]
    missed = [t for t in resolved if (near is not None and not t.met(m)) or not any(t.met(x) for x in full if x)]
    return WhatWouldWork(
        targets=", ".join(t.describe() for t in targets),
        missed=best_figures(outcomes, resolved, missed),
        nearest=near.number if near is not None else None,
        nearest_config=flags_text(near) if near is not None else "",
        nearest_shortfall={t.describe(): round(shortfall(t, m), 4) for t in resolved} if near is not None else {},
        load=load,
        command=command,
        not_searched=not_searched,
    )
