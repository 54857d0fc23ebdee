"""The best's figures: one typed record every surface that shows the best reads.

A study measures its best twice over: once in the search (one run, selected as the top of many
noisy figures: biased up) and, when a verdict ran, on fresh servers against the defaults (the
proof runs, D W W D). Only the second is evidence, so where the verdict tested the named best,
its figures are the proof runs the verdict decided on (the same first `pairs` usable runs per
arm): each arm's geometric mean with its 95% interval and the change against the defaults with
the verdict's own interval (`verdict.stats.compare`, as its `Effect`s). Without such runs (no
verdict ran, or the defaults were kept without a proof) the figures are the search measurements,
labelled so. When the defaults are the best there is no change to show: a table of the defaults
against themselves says nothing.

The summary, `kvtune show`, the report, the launch and verify scripts' headers, the CSV export
and `kvtune compare` all print `BestFigures` (results.json records it as "best_figures"), so no
surface can print a figure another one contradicts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from kvtune.study.outcome import TrialOutcome
from kvtune.study.verdict_evidence import evidence_of
from kvtune.verdict import OBJECTIVE, Role, Run, Verdict
from kvtune.verdict.stats import compare, level

FRESH, SEARCH = "fresh", "search"

# (metrics key, label, unit, higher is better): the figures every surface shows for the best
SHOWN = (
    ("output_throughput", "output", "tok/s", True),
    ("request_throughput", "requests", "/s", True),
    ("p95_ttft_ms", "TTFT p95", "ms", False),
    ("p95_tpot_ms", "TPOT p95", "ms", False),
    ("p95_itl_ms", "ITL p95", "ms", False),
    ("p95_e2el_ms", "E2EL p95", "ms", False),
)


@dataclass(frozen=True)
class Figure:
    """One metric of one side: the figure and its 95% interval (None: one run, no spread)."""

    value: float
    low: float | None = None
    high: float | None = None

    def text(self, unit: str = "") -> str:
        """``51.8 tok/s [48.1, 55.7]``"""
        u = f" {unit}" if unit else ""
        ci = f" [{_num(self.low)}, {_num(self.high)}]" if self.low is not None and self.high is not None else ""
        return f"{_num(self.value)}{u}{ci}"


@dataclass(frozen=True)
class Change:
    """The best over the defaults on one metric, in percent, with its 95% interval when the
    figures are fresh runs (a search measurement has none)."""

    pct: float
    low: float | None = None
    high: float | None = None

    def text(self) -> str:
        """``+29.8% [+11.4%, +51.3%]`` (fresh) or ``+29.6%`` (search)."""
        if self.low is None or self.high is None:
            return f"{self.pct:+.1f}%"
        return f"{self.pct:+.1f}% [{self.low:+.1f}%, {self.high:+.1f}%]"

    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


@dataclass(frozen=True)
class MetricRow:
    metric: str
    label: str
    unit: str
    higher_better: bool
    best: Figure
    defaults: Figure | None = None  # None: the best is the defaults
    change: Change | None = None

    @property
    def better(self) -> bool | None:
        if self.change is None:
            return None
        return self.change.pct > 0 if self.higher_better else self.change.pct < 0


@dataclass(frozen=True)
class BestFigures:
    """The named best's figures (`trial`) against the defaults (`baseline`): fresh runs of the
    verdict (`source` FRESH, `runs` per side) or its search measurement (SEARCH, 1 run)."""

    trial: int
    baseline: int | None
    source: str
    runs: int
    objective: str  # the objective's name (its row's label)
    rows: tuple[MetricRow, ...] = ()
    objective_row: MetricRow | None = None

    @property
    def fresh(self) -> bool:
        return self.source == FRESH

    @property
    def is_defaults(self) -> bool:
        return self.baseline is not None and self.trial == self.baseline

    def label(self) -> str:
        """What the figures are: ``fresh runs: 3 each (95% interval)``."""
        if self.fresh:
            each = " each" if not self.is_defaults else ""
            return f"fresh runs: {self.runs}{each} (95% interval)"
        if self.is_defaults:
            return "search measurement: 1 run (no interval)"
        return "search measurement: 1 run each (the best's was selected as the maximum: biased up; no interval)"

    def row(self, metric: str) -> MetricRow | None:
        return next((r for r in self.rows if r.metric == metric), None)

    def objective_text(self) -> str:
        """``output_throughput 51.8 tok/s [48.1, 55.7], +29.8% [+11.4%, +51.3%] against the
        defaults (fresh runs: 3 each (95% interval))``"""
        r = self.objective_row
        if r is None:
            return f"{self.objective}: no figure ({self.label()})"
        out = f"{self.objective} {r.best.text(r.unit)}"
        if r.change is not None:
            out += f", {r.change.text()} against the defaults"
        return f"{out} ({self.label()})"

    def rows_text(self, defaults: bool = False) -> str:
        """Every shown metric of the best (`defaults`: of the defaults) with its interval."""
        sides = [(r, r.defaults if defaults else r.best) for r in self.rows]
        return ", ".join(f"{r.label} {f.text(r.unit)}" for r, f in sides if f is not None) or "no figures"

    def measured_text(self) -> str:
        """One line of every shown metric, labelled: the scripts' headers."""
        return f"{self.label()}: {self.rows_text()}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BestFigures":
        return cls(
            trial=int(d["trial"]),
            baseline=d.get("baseline"),
            source=str(d.get("source") or SEARCH),
            runs=int(d.get("runs") or 1),
            objective=str(d.get("objective") or "objective"),
            rows=tuple(_row(r) for r in d.get("rows") or ()),
            objective_row=_row(d["objective_row"]) if d.get("objective_row") else None,
        )


def recorded(results: Mapping[str, Any]) -> BestFigures | None:
    """The best's figures a results.json records (None: none recorded, or a file older than them)."""
    stored = results.get("best_figures")
    if not isinstance(stored, Mapping):
        return None
    try:
        return BestFigures.from_dict(stored)
    except (KeyError, TypeError, ValueError):
        return None


def _row(d: Mapping[str, Any]) -> MetricRow:
    return MetricRow(
        metric=str(d["metric"]),
        label=str(d["label"]),
        unit=str(d.get("unit") or ""),
        higher_better=bool(d.get("higher_better")),
        best=Figure(**d["best"]),
        defaults=Figure(**d["defaults"]) if d.get("defaults") else None,
        change=Change(**d["change"]) if d.get("change") else None,
    )


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def best_figures(
    outcomes: Sequence[TrialOutcome],
    best: TrialOutcome | None,
    baseline: TrialOutcome | None,
    verdict: Verdict | None,
    objective_key: str,
    maximize: bool,
) -> BestFigures | None:
    """The named best's figures: the verdict's proof runs when it tested this best (or kept the
    defaults after testing a candidate: the defaults' own proof runs), else its search
    measurement. None without a best."""
    if best is None:
        return None
    name = verdict.objective if verdict is not None else objective_key
    fresh = _proof_arms(outcomes, best, baseline, verdict)
    if fresh is not None:
        w, d = fresh
        return _fresh(best, baseline, w, d, name, objective_key, maximize)
    return _search(best, baseline, name, objective_key, maximize)


def _proof_arms(
    outcomes: Sequence[TrialOutcome], best: TrialOutcome, baseline: TrialOutcome | None, verdict: Verdict | None
) -> tuple[list[Run], list[Run]] | None:
    """The runs the verdict decided on: the first `pairs` usable proof runs of its candidate (W)
    and of the defaults (D), as the best's and the defaults' arms; None when it has none for
    this best."""
    if verdict is None or verdict.candidate is None or baseline is None or verdict.counted.pairs < 1:
        return None
    if best.number not in (verdict.candidate, baseline.number):
        return None
    ev = evidence_of(outcomes)
    p = verdict.counted.pairs
    w = [r for r in ev.of(verdict.candidate, Role.PROOF) if r.usable][:p]
    d = [r for r in ev.of(baseline.number, Role.PROOF) if r.usable][:p]
    if not d or (best.number == verdict.candidate and not w):
        return None
    return (w if best.number == verdict.candidate else d), d


def _values(runs: Sequence[Run], key: str) -> list[float] | None:
    out = []
    for r in runs:
        v = r.values.get(key)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            return None
        out.append(float(v))
    return out or None


def _level(xs: list[float]) -> Figure:
    lvl = level(xs)
    assert lvl is not None
    if lvl.n < 2:
        return Figure(math.exp(lvl.center))
    value, low, high = lvl.interval()
    return Figure(value, low, high)


def _fresh_row(
    key: str, label: str, unit: str, higher: bool, w: Sequence[Run], d: Sequence[Run], same: bool
) -> MetricRow | None:
    xs = _values(w, key)
    if xs is None:
        return None
    if same:
        return MetricRow(key, label, unit, higher, _level(xs))
    ys = _values(d, key)
    if ys is None:
        return MetricRow(key, label, unit, higher, _level(xs))
    comp = compare(xs, ys)
    change = None
    if comp is not None:
        ratio, low, high = comp.ratio()
        if comp.dof >= 1 and comp.se > 0:
            change = Change((ratio - 1) * 100, (low - 1) * 100, (high - 1) * 100)
        else:
            change = Change((ratio - 1) * 100)
    return MetricRow(key, label, unit, higher, _level(xs), _level(ys), change)


def _fresh(
    best: TrialOutcome,
    baseline: TrialOutcome | None,
    w: list[Run],
    d: list[Run],
    name: str,
    objective_key: str,
    maximize: bool,
) -> BestFigures:
    same = baseline is not None and best.number == baseline.number
    rows = tuple(r for k, lab, u, hi in SHOWN if (r := _fresh_row(k, lab, u, hi, w, d, same)) is not None)
    obj = _fresh_row(OBJECTIVE, name, _unit(objective_key), maximize, w, d, same)
    return BestFigures(best.number, baseline.number if baseline else None, FRESH, len(w), name, rows, obj)


def _search(
    best: TrialOutcome, baseline: TrialOutcome | None, name: str, objective_key: str, maximize: bool
) -> BestFigures:
    same = baseline is None or best.number == baseline.number
    base_m = {} if same or baseline is None else dict(baseline.metrics or {})
    rows = []
    for key, label, unit, higher in SHOWN:
        row = _search_row(key, label, unit, higher, (best.metrics or {}).get(key), base_m.get(key))
        if row is not None:
            rows.append(row)
    base_obj = None if same or baseline is None else baseline.objective
    obj = _search_row(OBJECTIVE, name, _unit(objective_key), maximize, best.objective, base_obj)
    return BestFigures(best.number, baseline.number if baseline else None, SEARCH, 1, name, tuple(rows), obj)


def _search_row(key: str, label: str, unit: str, higher: bool, x: Any, b: Any) -> MetricRow | None:
    if not _finite(x):
        return None
    if not _finite(b) or not b:
        return MetricRow(key, label, unit, higher, Figure(float(x)))
    return MetricRow(key, label, unit, higher, Figure(float(x)), Figure(float(b)), Change((x / b - 1) * 100))


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _unit(key: str) -> str:
    shown = {k: u for k, _, u, _ in SHOWN}
    return shown.get(key, "ms" if key.endswith("_ms") else "")
