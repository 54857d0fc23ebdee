"""Targets ("ttft<1s", "tpot_p99<=50ms", "error_rate<1%") and their constraint margins.

Grammar: ``METRIC[_STAT] OP NUMBER[UNIT]``.

- METRIC: ttft, tpot, itl, e2el (latencies; units s or ms), error_rate and slo_attainment (unit
  % or a fraction; slo_attainment is the share of requests meeting every per-request SLO of
  ``--slo``, objectives/slo.py), output_throughput (tok/s) and request_throughput (req/s).
- STAT: mean, median, p50, p90, p95, p99. A bare latency metric means p95.
- OP: <, <=, >, >=.

A target becomes an Optuna constraint margin, normalized by its threshold so that targets of
different scales weigh alike: margin <= 0 is feasible. Constraints are keyed by the whole target
(`Target.constraint_key`, e.g. ``output_throughput>50``), so two targets on one metric (a floor
and a ceiling) are two constraints; the same target given twice is an error. This module is pure
(no I/O).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from kvtune.errors import TargetError
from kvtune.objectives.metrics import LATENCY_METRICS

STATS = ("mean", "median", "p50", "p90", "p95", "p99")
DEFAULT_STAT = "p95"
RATE_METRICS = ("error_rate", "slo_attainment")
THROUGHPUT_METRICS = {"output_throughput": "tok/s", "request_throughput": "req/s"}
# Answer fidelity against the defaults (objectives/fidelity.py): the KL divergence of the
# next-token distributions, in nats; the target reads the 95% upper bound of its mean.
FIDELITY_METRICS = ("kld",)
METRICS = LATENCY_METRICS + RATE_METRICS + tuple(THROUGHPUT_METRICS) + FIDELITY_METRICS
# A margin stands in for +inf (every request failed) so Optuna's arithmetic stays finite.
MAX_MARGIN = 1e6
# The largest number a target may give: 1e12 (ms: 30 years; tok/s; a factor) is past anything a
# run measures, and a threshold in ms stays finite ('ttft<1e308s' was inf ms, stored as a
# constraint's name and written to JSON that refuses inf).
MAX_BOUND = 1e12

_TARGET_RE = re.compile(
    r"^\s*(?P<name>[a-z_0-9]+)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<num>[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(?P<unit>[a-z%/]*)\s*$",
    re.IGNORECASE,
)
_UNIT_TO_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001}


@dataclass(frozen=True)
class Target:
    """One parsed target. `threshold` is in the metric's base unit (ms, fraction, per second)."""

    metric: str
    stat: str  # "" for error_rate and throughputs
    op: str
    threshold: float
    text: str = ""
    # A target relative to the baseline measured on this machine ("ttft<0.8x": 80% of the
    # baseline's TTFT p95): the factor. `threshold` is NaN until `resolve` sets it.
    factor: float | None = None

    @property
    def relative(self) -> bool:
        return self.factor is not None

    def resolve(self, baseline_metrics: dict[str, float]) -> "Target":
        """This target with its threshold set from the baseline's figure (absolute targets are
        returned as they are). Raises TargetError when the baseline has no such figure."""
        if self.factor is None:
            return self
        base = baseline_metrics.get(self.key)
        if base is None or not math.isfinite(base):
            raise TargetError(f"target {self.text!r} is relative to the baseline, which has no {self.key}")
        return replace(self, threshold=self.factor * float(base))

    @property
    def key(self) -> str:
        """The metrics-summary key this target reads (vLLM naming)."""
        if self.metric in LATENCY_METRICS:
            stat = "median" if self.stat == "p50" else self.stat
            return f"{stat}_{self.metric}_ms"
        if self.metric == "kld":
            return "kld_upper"
        return self.metric

    @property
    def fidelity(self) -> bool:
        """Judged on the answers' fidelity probe, not on the load's requests."""
        return self.metric in FIDELITY_METRICS

    @property
    def name(self) -> str:
        """Short constraint name, e.g. ``ttft_p95``."""
        return f"{self.metric}_{self.stat}" if self.stat else self.metric

    @property
    def constraint_key(self) -> str:
        """The whole target in one canonical word, e.g. ``ttft_p95<1000ms``, ``error_rate<1%``,
        ``output_throughput>50``, ``ttft_p95<0.8x``: the constraint's name (it parses back to the
        same target)."""
        if self.factor is not None:
            value = f"{self.factor:.12g}x"
        elif self.metric in LATENCY_METRICS:
            value = f"{self.threshold:.12g}ms"
        elif self.metric in RATE_METRICS:
            value = f"{self.threshold * 100:.12g}%"
        else:
            value = f"{self.threshold:.12g}"
        return f"{self.name}{self.op}{value}"

    @property
    def upper(self) -> bool:
        return self.op in ("<", "<=")

    def describe(self) -> str:
        """Human-readable form, e.g. ``TTFT p95 < 1000 ms``, ``TTFT p95 < 0.8x the baseline``."""
        if self.factor is not None:
            label = (
                f"{self.metric.upper()} {self.stat}"
                if self.metric in LATENCY_METRICS
                else self.metric.replace("_", " ")
            )
            resolved = "" if math.isnan(self.threshold) else f" (= {_fmt(round(self.threshold, 1))})"
            return f"{label} {self.op} {_fmt(self.factor)}x the baseline{resolved}"
        if self.metric in LATENCY_METRICS:
            value = f"{_fmt(self.threshold)} ms"
            return f"{self.metric.upper()} {self.stat} {self.op} {value}"
        if self.metric in RATE_METRICS:
            return f"{self.metric.replace('_', ' ').replace('slo', 'SLO')} {self.op} {_fmt(self.threshold * 100)}%"
        if self.fidelity:
            return f"KL divergence from the defaults' answers (95% upper bound) {self.op} {_fmt(self.threshold)}"
        return f"{self.metric} {self.op} {_fmt(self.threshold)} {THROUGHPUT_METRICS[self.metric]}"

    def value(self, metrics: dict[str, float]) -> float:
        v = metrics.get(self.key, math.nan)
        if (v is None or math.isnan(v)) and self.metric == "slo_attainment":
            return 0.0  # no SLO was measured: no request is known to have met it
        return math.inf if v is None or math.isnan(v) else float(v)

    def margin(self, metrics: dict[str, float]) -> float:
        """Normalized violation: <= 0 when met, > 0 by how much (relative) it is missed."""
        v = self.value(metrics)
        scale = abs(self.threshold) if self.threshold else 1.0
        if math.isinf(v):
            return MAX_MARGIN if (v > 0) == self.upper else -1.0
        raw = (v - self.threshold) if self.upper else (self.threshold - v)
        m = raw / scale
        if self.op in ("<", ">") and raw == 0:
            m = 1e-9  # the strict bound is not met at equality
        return max(min(m, MAX_MARGIN), -MAX_MARGIN)

    def met(self, metrics: dict[str, float]) -> bool:
        return self.margin(metrics) <= 0


def _fmt(x: float) -> str:
    return f"{x:g}"


def parse_target(text: str) -> Target:
    """Parse one target; raise `TargetError` with a one-line message naming what to fix."""
    m = _TARGET_RE.match(text or "")
    if not m:
        raise TargetError(
            f"cannot parse target {text!r}: expected METRIC OP VALUE, e.g. 'ttft<1s', 'tpot_p99<=50ms', 'error_rate<1%'"
        )
    name, op, num, unit = m["name"].lower(), m["op"], float(m["num"]), m["unit"].lower()
    if not math.isfinite(num) or num > MAX_BOUND:  # '1e400' reads as inf; a threshold past it in ms, too
        raise TargetError(f"target {text!r}: {m['num']} is past any measurement: give a bound of at most 1e12")
    metric, stat = name, ""
    for s in STATS:
        if name.endswith("_" + s) and name[: -len(s) - 1] in LATENCY_METRICS:
            metric, stat = name[: -len(s) - 1], s
            break
    if metric not in METRICS:
        raise TargetError(
            f"unknown metric {metric!r} in target {text!r}: use one of {', '.join(METRICS)} "
            f"(latencies take _mean, _median, _p50, _p90, _p95 or _p99)"
        )
    if metric in LATENCY_METRICS:
        stat = stat or DEFAULT_STAT
    if metric in FIDELITY_METRICS:
        return _fidelity_target(metric, op, num, unit, text)
    if unit == "x":
        if metric in RATE_METRICS:
            raise TargetError(f"target {text!r}: {metric} cannot be relative; write e.g. '{metric}<1%'")
        if num <= 0:
            raise TargetError(f"target {text!r}: a relative target needs a positive factor, e.g. 'ttft<0.8x'")
        return Target(metric=metric, stat=stat, op=op, threshold=math.nan, text=text.strip(), factor=num)
    if metric in LATENCY_METRICS:
        if unit not in _UNIT_TO_MS:  # 'ttft<1h' has a unit, but not one a latency is measured in
            which = " of s, ms or us" + (f" (not {unit!r})" if unit else "")
            raise TargetError(f"target {text!r} needs a time unit{which}: write e.g. '{metric}<1s' or '{metric}<800ms'")
        threshold = num * _UNIT_TO_MS[unit]
    elif metric in RATE_METRICS:
        if unit == "%":
            threshold = num / 100.0
        elif unit == "":
            threshold = num
        else:
            raise TargetError(f"target {text!r}: {metric} takes '%' or a fraction, not {unit!r}")
        if threshold > 1:
            raise TargetError(f"target {text!r}: {metric.replace('_', ' ')} cannot exceed 100%")
    else:
        allowed = ("", THROUGHPUT_METRICS[metric])
        if unit not in allowed:
            raise TargetError(f"target {text!r}: {metric} is in {THROUGHPUT_METRICS[metric]}, not {unit!r}")
        threshold = num
    never = _never_met(metric, op, threshold)
    if never:
        raise TargetError(f"target {text!r} can never hold: {never}")
    return Target(metric=metric, stat=stat, op=op, threshold=threshold, text=text.strip())


def _never_met(metric: str, op: str, threshold: float) -> str | None:
    """Why no measurement can meet the absolute bound `metric op threshold`, or None. No metric
    is below 0; a latency or a throughput of a run that served anything is above 0; a rate is at
    most 100%."""
    if op == "<" and threshold <= 0:
        return f"{metric} is never below 0: give a bound above 0"
    if op == "<=" and threshold <= 0 and (metric in LATENCY_METRICS or metric in THROUGHPUT_METRICS):
        return f"{metric} is always above 0: give a bound above 0"
    if op == ">" and metric in RATE_METRICS and threshold >= 1:
        return f"{metric.replace('_', ' ')} is never above 100%"
    return None


def _fidelity_target(metric: str, op: str, num: float, unit: str, text: str) -> Target:
    """``kld<0.01``: an upper bound in nats, above zero (the defaults' own answers sit at 0)."""
    if unit not in ("", "nats"):
        raise TargetError(
            f"target {text!r}: {metric} is a KL divergence in nats, written without a unit, e.g. 'kld<0.01'"
        )
    if op not in ("<", "<="):
        raise TargetError(f"target {text!r}: {metric} takes an upper bound, e.g. 'kld<0.01'")
    if num <= 0:
        raise TargetError(f"target {text!r}: no config can be below 0; give a positive bound, e.g. 'kld<0.01'")
    return Target(metric=metric, stat="", op=op, threshold=num, text=text.strip())


def parse_targets(texts: list[str]) -> list[Target]:
    """Parse several targets; reject the same target given twice (``ttft<1s`` and
    ``ttft_p95<1000ms``) and contradictions such as ``ttft<1s`` with ``ttft>2s``."""
    targets = [parse_target(t) for t in texts]
    seen: dict[str, Target] = {}
    for t in targets:
        if t.constraint_key in seen:
            first = seen[t.constraint_key]
            same = f"{first.text!r}" + ("" if first.text == t.text else f" and {t.text!r}")
            raise TargetError(f"target {t.constraint_key} is given twice ({same}): give each target once")
        seen[t.constraint_key] = t
    by_key: dict[str, list[Target]] = {}
    for t in targets:
        by_key.setdefault(t.key, []).append(t)
    for group in by_key.values():
        uppers = [t for t in group if t.upper]
        lowers = [t for t in group if not t.upper]
        for u in uppers:
            for lo in (t for t in lowers if t.relative == u.relative):  # thresholds, or factors of one baseline
                strict = u.op == "<" or lo.op == ">"
                if _bound(u) < _bound(lo) or (strict and _bound(u) == _bound(lo)):
                    raise TargetError(
                        f"targets {lo.text!r} and {u.text!r} contradict each other: no value of {u.name} can meet both"
                    )
    return targets


def _bound(t: Target) -> float:
    """A target's bound: its factor when relative to the baseline, else its threshold."""
    return t.threshold if t.factor is None else t.factor


def with_default_error_target(targets: list[Target]) -> list[Target]:
    """Add ``error_rate<1%`` unless the user set an error-rate target: failed requests are
    never a feasible way to be fast."""
    if any(t.metric == "error_rate" for t in targets):
        return targets
    return [*targets, parse_target("error_rate<1%")]


# The gate a study gets when its space can change the model's numerics and it set no `kld`
# target. On the demo model (docs/fidelity.md, benchmarks/fidelity.py) the A/A and the lossless
# flags sit at 0, q8_0 K+V at an upper bound of 0.006 (passes), q4_0 V alone at 0.012 and q4_0
# K+V at 0.09 (first differing token at 5, refused).
DEFAULT_FIDELITY_TARGET = "kld<0.01"


def with_fidelity_target(targets: list[Target]) -> list[Target]:
    """Add the default fidelity gate unless the user set a `kld` target."""
    if any(t.fidelity for t in targets):
        return targets
    return [*targets, parse_target(DEFAULT_FIDELITY_TARGET)]
