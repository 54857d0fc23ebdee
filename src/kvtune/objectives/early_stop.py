"""Exact early stop: end a measurement the moment a target can no longer hold.

A trial costs minutes; once enough requests have broken an upper-bound target, the rest of the
run cannot rescue it, and measuring them only burns hardware time. This rule stops only what is
*certain*, with no statistics: after each finished request it builds the best completion the
remaining requests could possibly give (every one of them a success at 0 latency) and judges it
with the very functions the final verdict uses (`metrics.percentile`, the same ms conversion, the
same pools, `Target.met`). If even that completion misses the target, every real completion
misses it too, because:

- latency percentiles (linear interpolation, failed requests as +inf) never decrease when a
  value grows, and adding a 0 never raises one, so ``pool + [0] * remaining`` is the least
  value any completion reaches (a remaining request that adds no value, e.g. a one-token answer
  with no TPOT, only raises it). In count terms: it stops once more requests broke the
  threshold than the percentile over N allows, with the interpolation taken exactly.
- a latency mean counts successful requests only, so its least value is
  ``sum_so_far / (values_so_far + remaining)``, at most N requests: it stops once the sum so far
  exceeds that many times the threshold (latencies are non-negative).
- ``error_rate`` is failed / sent, least when all remaining requests succeed: ``failed / N``.

Nothing else is provable and never stops a run: lower bounds (``output_throughput>X``,
``ttft>1s``), throughputs (they depend on the run's duration), and ITL (pooled over every token
gap, so remaining requests can add any number of 0 gaps). Feed it measured requests only
(warm-up excluded), as they finish. The verdict is monotone: once stopped, more requests cannot
un-stop it, and the partial summary of the requests seen so far misses the target as well, so the
trial's recorded constraints are violated too. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from kvtune.objectives.metrics import RequestSample, percentile
from kvtune.objectives.targets import Target

# Per-request value of each provable latency metric, exactly as `metrics.summarize_requests` pools it.
_PER_REQUEST = ("ttft", "tpot", "e2el")
_PERCENTILE_OF = {"median": 50.0, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


def provable(target: Target) -> bool:
    """Whether an early stop can ever be certain for this target (see the module docstring).
    A relative target not yet resolved from the baseline has no threshold: never provable."""
    if not target.upper or not math.isfinite(target.threshold):
        return False
    if target.metric == "error_rate":
        return True
    return target.metric in _PER_REQUEST and (target.stat == "mean" or target.stat in _PERCENTILE_OF)


def _value_s(sample: RequestSample, metric: str) -> float | None:
    """The request's value in seconds for `metric`, or None when it adds none (as metrics.py)."""
    if metric == "ttft":
        return sample.ttft_s
    if metric == "e2el":
        return sample.e2el_s
    return sample.tpot_s


@dataclass(frozen=True)
class Stop:
    """Why a run was stopped: the target that can no longer hold and the reason for people."""

    target: Target
    observed: int
    planned: int
    reason: str


class _Watch:
    """The running state of one provable target."""

    def __init__(self, target: Target, planned: int) -> None:
        self.target = target
        self.planned = planned
        self.values_ms: list[float] = []  # successful requests' values, in arrival order
        self.failed = 0
        self.broke = 0  # requests over the threshold, failed ones included
        self.negative = False  # a negative latency would void the proof: never stop then
        self.first_error = ""  # why the first failed request failed (e.g. "truncated: 2 of 4 tokens")

    def observe(self, sample: RequestSample) -> None:
        t = self.target
        if not sample.ok:
            self.failed += 1
            self.broke += 1
            self.first_error = self.first_error or (sample.error or "")
            return
        if t.metric == "error_rate":
            return
        v = _value_s(sample, t.metric)
        if v is None:
            return
        ms = v * 1000.0  # the same float metrics.py computes
        self.negative = self.negative or ms < 0
        self.values_ms.append(ms)
        strict = t.op == "<"
        if ms > t.threshold or (strict and ms == t.threshold):
            self.broke += 1

    def best_case(self, observed: int) -> float:
        """The target's metric for the best completion of the remaining requests."""
        t = self.target
        remaining = self.planned - observed
        if t.metric == "error_rate":
            return self.failed / self.planned
        if t.stat == "mean":
            n = len(self.values_ms) + remaining
            return sum(self.values_ms) / n if n else math.nan
        pool = self.values_ms + [math.inf] * self.failed + [0.0] * remaining
        return percentile(pool, _PERCENTILE_OF[t.stat])

    def lost(self, observed: int) -> bool:
        if self.negative:
            return False
        return not self.target.met({self.target.key: self.best_case(observed)})

    def reason(self, observed: int) -> str:
        t = self.target
        head = f"stopped after {observed} of {self.planned} requests: "
        goal = _goal(t)
        if t.metric == "error_rate":
            why = f" (first: {self.first_error})" if self.first_error else ""
            return f"{head}{self.failed} failed{why}, {goal} can no longer hold"
        label = f"{t.metric.upper()} {_duration(t.threshold)}"
        first = f", first: {self.first_error}" if self.first_error else ""
        failed = f" ({self.failed} failed{first})" if self.failed else ""
        if t.stat == "mean":
            left = self.planned - observed
            return (
                f"{head}{t.metric.upper()} adds up to {_duration(sum(self.values_ms))} over "
                f"{len(self.values_ms)} requests{failed}; even at 0 for the {left} left, "
                f"{goal} can no longer hold"
            )
        return f"{head}{self.broke} over {label}{failed}, {goal} can no longer hold"


def _duration(ms: float) -> str:
    """1000 ms -> '1 s', 800 ms -> '800 ms', as people read latencies."""
    return f"{ms / 1000:.3g} s" if ms >= 1000 else f"{ms:.3g} ms"


def _goal(t: Target) -> str:
    """The target the way its stat reads, e.g. 'p95<10s', 'mean<=800ms', 'error_rate<1%'."""
    if t.metric == "error_rate":
        return f"error_rate{t.op}{t.threshold * 100:g}%"
    thr = f"{t.threshold / 1000:g}s" if t.threshold >= 1000 else f"{t.threshold:g}ms"
    stat = "p50" if t.stat == "median" else t.stat
    return f"{stat}{t.op}{thr}"


class EarlyStop:
    """Watches a run of `planned_requests` measured requests against `targets`.

    Call `observe(sample)` for each request as it finishes; it returns the `Stop` on the request
    that decides it (and keeps returning it after). `verdict()` is the reason text, or None while
    every target can still hold. Targets that can never be proven lost are ignored (`watched`
    lists the others); with none, it never stops. A target no run can meet (``ttft<0ms``) is
    lost before the first request: `stop` is already set after construction.
    """

    def __init__(self, targets: Sequence[Target], planned_requests: int) -> None:
        if planned_requests < 1:
            raise ValueError(f"planned_requests must be at least 1, got {planned_requests}")
        self.planned = planned_requests
        self.observed = 0
        self._watches = [_Watch(t, planned_requests) for t in targets if provable(t)]
        self._stop: Stop | None = None
        self._judge()  # a target no run can meet (e.g. ``ttft<0ms``) is lost before it starts

    @property
    def watched(self) -> tuple[Target, ...]:
        return tuple(w.target for w in self._watches)

    @property
    def stop(self) -> Stop | None:
        return self._stop

    def observe(self, sample: RequestSample) -> Stop | None:
        if self.observed >= self.planned:
            raise ValueError(f"observed more requests than the {self.planned} planned")
        self.observed += 1
        for w in self._watches:
            w.observe(sample)
        self._judge()
        return self._stop

    def _judge(self) -> None:
        if self._stop is not None:
            return
        for w in self._watches:
            if w.lost(self.observed):
                self._stop = Stop(w.target, self.observed, self.planned, w.reason(self.observed))
                return

    def verdict(self) -> str | None:
        return self._stop.reason if self._stop else None
