"""Per-request SLOs ("ttft<2s,tpot<100ms") and the share of requests that met all of them.

A percentile target says how slow the slowest few requests were; an SLO says what each request
must do, and ``slo_attainment`` is the share of the run's requests that did: every limit met, a
failed request (error, timeout, truncation) a miss. This is how vLLM's tuning recipes and
GuideLLM judge a config ("99% of requests within their SLOs"), and the target
``slo_attainment>99%`` asks for it. Limits: ttft, tpot, e2el (per request, with a time unit),
each with < or <=. Parsed once at the edge; a bad one is a one-line `TargetError`. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from kvtune.errors import SpecError, TargetError
from kvtune.objectives.metrics import RequestSample

SLO_METRICS = ("ttft", "tpot", "e2el")
_ITEM_RE = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)\s*(?P<op><=|<)\s*(?P<num>[0-9]*\.?[0-9]+)\s*(?P<unit>[a-z]*)\s*$", re.I
)
_UNIT_TO_S = {"s": 1.0, "ms": 0.001, "us": 1e-6}
#: The longest limit an SLO may set: a day, past any request's latency (a request that long has
#: timed out); a limit of 0 no request meets (a latency is above 0).
MAX_LIMIT_S = 86400.0


@dataclass(frozen=True)
class SloLimit:
    metric: str  # ttft, tpot or e2el
    op: str  # < or <=
    seconds: float

    def met(self, value_s: float) -> bool:
        return value_s < self.seconds if self.op == "<" else value_s <= self.seconds


@dataclass(frozen=True)
class Slo:
    """The per-request SLOs, as typed (`text`) and parsed (`limits`)."""

    text: str
    limits: tuple[SloLimit, ...]

    def met(self, s: RequestSample) -> bool:
        """Whether request `s` met every limit; a failed request never does. A one-token answer
        has no TPOT: it meets any TPOT limit (as `slo_goodput`)."""
        if not s.ok:
            return False
        values = {"ttft": s.ttft_s, "e2el": s.e2el_s, "tpot": s.tpot_s or 0.0}
        return all((v := values[lim.metric]) is not None and lim.met(v) for lim in self.limits)

    def attainment(self, samples: list[RequestSample]) -> float:
        """Share of `samples` that met every limit (0 for no samples: nothing was served)."""
        return sum(1 for s in samples if self.met(s)) / len(samples) if samples else 0.0

    def describe(self) -> str:
        """``TTFT < 2 s, TPOT < 100 ms`` for summaries."""
        return ", ".join(f"{lim.metric.upper()} {lim.op} {_time(lim.seconds)}" for lim in self.limits)


def _time(seconds: float) -> str:
    return f"{seconds:g} s" if seconds >= 1 else f"{seconds * 1000:g} ms"


def parse_slo(text: str) -> Slo:
    """``"ttft<2s,tpot<100ms"`` -> Slo; raise `TargetError` naming what to fix."""
    items = [t for t in (text or "").split(",") if t.strip()]
    if not items:
        raise TargetError("slo is empty: give per-request limits, e.g. 'ttft<2s,tpot<100ms'")
    limits: list[SloLimit] = []
    for item in items:
        m = _ITEM_RE.match(item)
        if not m:
            raise TargetError(
                f"cannot parse SLO {item.strip()!r}: expected METRIC<VALUE with a time unit, e.g. 'ttft<2s', 'tpot<=100ms'"
            )
        metric, unit = m["metric"].lower(), m["unit"].lower()
        if metric not in SLO_METRICS:
            raise TargetError(
                f"SLO {item.strip()!r}: {metric!r} is no per-request metric; use {', '.join(SLO_METRICS)} "
                f"(an SLO holds for each request, so it takes no _p95 or other statistic)"
            )
        if unit not in _UNIT_TO_S:  # 'ttft<1h' has a unit, but not one a request's latency is in
            which = " of s, ms or us" + (f" (not {unit!r})" if unit else "")
            raise TargetError(
                f"SLO {item.strip()!r} needs a time unit{which}: write e.g. '{metric}<2s' or '{metric}<800ms'"
            )
        if any(lim.metric == metric for lim in limits):
            raise TargetError(f"slo limits {metric} twice: give each metric once")
        seconds = float(m["num"]) * _UNIT_TO_S[unit]
        if not 0 < seconds <= MAX_LIMIT_S:  # 'ttft<0s' no request meets; 400 digits read as inf
            raise TargetError(
                f"SLO {item.strip()!r} can never hold: give a limit above 0 and at most {MAX_LIMIT_S:g} s"
                if seconds <= 0
                else f"SLO {item.strip()!r} is past any request: give a limit of at most {MAX_LIMIT_S:g} s"
            )
        limits.append(SloLimit(metric, m["op"], seconds))
    return Slo(text=",".join(i.strip() for i in items), limits=tuple(limits))


def slo_field(raw: str | Slo | None, uses: Iterable[str] = ()) -> Slo | None:
    """A study's slo field, as typed (text) or parsed -> Slo, checked against the objective and
    target metrics the study `uses` (slo_attainment needs an SLO); a one-line SpecError if bad."""
    if raw is None:
        if "slo_attainment" in uses:
            raise SpecError(
                "slo_attainment needs per-request SLOs: set slo, e.g. --set slo='ttft<2s,tpot<100ms' (kvtune bench: --slo)"
            )
        return None
    if isinstance(raw, Slo):
        return raw
    if not isinstance(raw, str):
        raise SpecError(f"slo must be text such as 'ttft<2s,tpot<100ms', got {raw!r}")
    try:
        return parse_slo(raw)
    except TargetError as e:
        raise SpecError(str(e)) from None
