"""Whether this host can answer a trace's replay within a trial, and how the replay shrinks when
it cannot: decided from a measured speed, before the first trial.

A production trace comes from a fleet. Replayed at its recorded lengths against one server it can
ask far more than that server answers: Mooncake's first 32 requests bring ~200k prompt tokens
within 9 s, and a 2-core CPU prefills a few hundred tokens a second, so every config, the
defaults included, fails by request timeout and the study ends without an answer. So `kvtune
run` first measures how fast the server's defaults serve here (`HostSpeed`, one short probe:
tuner/host_speed.py) and estimates the replay's *demand*: the seconds its requests would take
served one at a time (prompt tokens x prefill seconds per token + output tokens x decode seconds
per token). When that exceeds the trial's budget (`budget_s`: a quarter of the request timeout,
so even a replay the server answers one request at a time ends in time, with room for a config
twice as slow as the defaults), the lengths are scaled (the workload's `trace_length_scale`)
until it fits. The requests keep their number, arrival times, relative lengths and prefix
structure (blocks scale with them); the header says what changed, why, and the way back
(`--trace-length-scale 1` replays the recorded lengths, `--request-timeout` raises the budget).

The estimate is linear in tokens from one probe, on purpose: it overstates the decode of
concurrent requests (batched decode is cheaper per token) and understates prompts much longer
than the probe's (attention grows with the context). After scaling, the prompts are mostly
shorter than the probe's, where it is exact or conservative.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from kvtune.bench.traces import TraceRequest

# The share of the request timeout a trial's replay may ask, served one request at a time.
BUDGET_SHARE = 0.25
# Scaling stops here: below it the prompts are a handful of tokens and measure nothing of the trace.
MIN_SCALE = 1e-3


@dataclass(frozen=True)
class HostSpeed:
    """How fast the server's defaults served here: seconds per prompt token (TTFT over prompt
    length, at `probe_prompt_tokens`) and per output token (TPOT), medians of the probe."""

    prefill_s_per_token: float
    decode_s_per_token: float
    probe_prompt_tokens: int

    def service_s(self, requests: Iterable[TraceRequest]) -> float:
        """Seconds `requests` take served one after another at this speed."""
        return sum(
            r.input_tokens * self.prefill_s_per_token + r.output_tokens * self.decode_s_per_token for r in requests
        )

    def describe(self) -> str:
        return (
            f"the server's defaults prefilled {1 / self.prefill_s_per_token:,.0f} tokens/s (a "
            f"{self.probe_prompt_tokens}-token prompt) and decoded {1 / self.decode_s_per_token:,.0f} tokens/s here"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefill_s_per_token": self.prefill_s_per_token,
            "decode_s_per_token": self.decode_s_per_token,
            "probe_prompt_tokens": self.probe_prompt_tokens,
        }


def speed_from_probe(samples: Sequence[tuple[int, float, float | None]]) -> HostSpeed | None:
    """The speed from a probe's answered requests, each (prompt tokens, TTFT s, TPOT s or None):
    the medians, so one slow request does not decide. None: no request answered."""
    usable = [(n, ttft, tpot) for n, ttft, tpot in samples if n > 0 and ttft > 0]
    tpots = [tpot for _, _, tpot in usable if tpot is not None and tpot > 0]
    if not usable or not tpots:
        return None
    return HostSpeed(
        prefill_s_per_token=statistics.median(ttft / n for n, ttft, _ in usable),
        decode_s_per_token=statistics.median(tpots),
        probe_prompt_tokens=int(statistics.median(n for n, _, _ in usable)),
    )


@dataclass(frozen=True)
class DemandFit:
    """What the replay asks of this host and the length scale it gets (1: unchanged)."""

    speed: HostSpeed
    budget_s: float
    timeout_s: float
    requests: int
    asked_scale: float  # the lengths as asked (the workload's scale before the fit)
    asked_s: float  # the replay's demand at those lengths
    scale: float
    fitted_s: float  # the demand at `scale`

    @property
    def scaled(self) -> bool:
        return self.scale != self.asked_scale

    def describe(self) -> str:
        """One line for the header: the measured speed, the demand, the budget, the decision."""
        head = (
            f"{self.speed.describe()}; the trace's {self.requests} requests ask ~{self.asked_s:,.0f} s "
            f"served one at a time"
        )
        budget = f"a trial's {self.budget_s:g} s (a quarter of the {self.timeout_s:g} s request timeout)"
        if not self.scaled:
            return f"{head}, within {budget}: replayed at the recorded lengths"
        return (
            f"{head}, more than {budget}: lengths scaled by {self.scale:g} (~{self.fitted_s:,.0f} s); "
            f"workload.trace_length_scale: 1 replays the recorded lengths, workload.request_timeout_s raises the budget"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "speed": self.speed.to_dict(),
            "budget_s": self.budget_s,
            "requests": self.requests,
            "asked_scale": self.asked_scale,
            "asked_s": round(self.asked_s, 3),
            "scale": self.scale,
            "fitted_s": round(self.fitted_s, 3),
        }


def fit_demand(
    replayed_at: Callable[[float], Sequence[TraceRequest]],
    speed: HostSpeed,
    timeout_s: float,
    asked_scale: float = 1.0,
) -> DemandFit:
    """The largest length scale (two significant digits, at most `asked_scale`) whose replay
    this host serves within the budget. `replayed_at(scale)`: the requests a trial replays with
    lengths at that scale (clipped as the trace's sizing clips them), so the estimate is of what
    is really sent. Demand is not quite linear in the scale (lengths round to whole tokens, at
    least 1, and the clip moves), so the scale is lowered until the estimate fits."""
    budget = timeout_s * BUDGET_SHARE
    asked = replayed_at(asked_scale)
    asked_s = speed.service_s(asked)
    scale, demand = asked_scale, asked_s
    while demand > budget and scale > MIN_SCALE:
        scale = max(MIN_SCALE, _round_down(scale * budget / demand * 0.98))
        demand = speed.service_s(replayed_at(scale))
    return DemandFit(speed, budget, timeout_s, len(asked), asked_scale, asked_s, scale, demand)


def _round_down(x: float) -> float:
    """`x` cut (never rounded up) to two significant digits: a scale that reads as typed."""
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return round(math.floor(x / step + 1e-9) * step, 12)


@dataclass(frozen=True)
class HostFit:
    """What the fit did, for the header: the demand fit, or why there is none."""

    fit: DemandFit | None = None
    note: str | None = None  # no fit: why (resumed with its scale, the probe failed)

    def describe(self) -> str:
        return self.fit.describe() if self.fit is not None else (self.note or "")
