"""Per-request samples and their summary, with the definitions of ../shared/MEASUREMENT.md.

Names follow vLLM's `vllm bench serve` (mean_ttft_ms, p99_tpot_ms, output_throughput, ...) so
users can compare kvtune's figures with theirs. A failed request is never dropped silently: it
counts in the error rate and as +inf latency for percentile targets (see `targets.py`). A
truncated answer (fewer tokens than the forced output length) is such a failure, counted apart as
``truncated_requests``; ``tokens_counted_from_stream`` counts the answers whose server sent no
``usage.completion_tokens`` (their tokens were counted from the stream), and `sample_notes` says
both in words for the run's notes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from kvtune.objectives.slo import Slo

PERCENTILES = (50, 90, 95, 99)
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass
class RequestSample:
    """One request as the client saw it. Times are seconds on the client's monotonic clock."""

    send_time: float
    ok: bool = False
    ttft_s: float | None = None
    e2el_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    error: str = ""
    # Seconds this request waited for a free client slot (closed loop) before being sent.
    queue_wait_s: float = 0.0
    # Server-reported timings (llama-server's `timings` object), when present.
    server_timings: dict[str, Any] | None = None
    # Open loop: when the precomputed schedule said to send it (same clock as send_time).
    intended_send_time: float | None = None
    # When the request ended (last byte, error or timeout), on the same clock.
    end_time: float | None = None
    # The answer ended with fewer tokens than the forced output length (a failed request).
    truncated: bool = False
    # The server sent no usage.completion_tokens: output_tokens were counted from the stream.
    tokens_from_stream: bool = False
    # Multi-turn workloads: the conversation and its turn (1 = the first) this request was.
    conversation: int | None = None
    turn: int | None = None

    @property
    def schedule_lag_s(self) -> float | None:
        """Open loop: actual minus intended send time (how far the client ran behind)."""
        if self.intended_send_time is None:
            return None
        return self.send_time - self.intended_send_time

    @property
    def tpot_s(self) -> float | None:
        """(E2EL - TTFT) / (output_tokens - 1); undefined for one-token answers."""
        if not self.ok or self.ttft_s is None or self.e2el_s is None or self.output_tokens < 2:
            return None
        return (self.e2el_s - self.ttft_s) / (self.output_tokens - 1)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tpot_s"] = self.tpot_s
        d["schedule_lag_s"] = self.schedule_lag_s
        return d


def percentile(values: list[float], p: float) -> float:
    """Linear-interpolated percentile (numpy's default method), without numpy."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * p / 100.0
    lo = math.floor(k)
    hi = math.ceil(k)
    if lo == hi or xs[lo] == xs[hi]:  # equal neighbours (also two +inf) need no interpolation
        return xs[lo]
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def _stats(name: str, values_s: list[float], failed: int) -> dict[str, float]:
    """mean/median/p50.. in ms. Failed requests enter percentiles as +inf, not the mean."""
    out: dict[str, float] = {}
    finite = [v * 1000.0 for v in values_s]
    out[f"mean_{name}_ms"] = sum(finite) / len(finite) if finite else math.nan
    pooled = finite + [math.inf] * failed
    out[f"median_{name}_ms"] = percentile(pooled, 50)
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = percentile(pooled, p)
    return out


def summarize_requests(
    samples: list[RequestSample],
    duration_s: float,
    goodput_fn: Callable[[RequestSample], bool] | None = None,
    slo: Slo | None = None,
) -> dict[str, float]:
    """Summarize one benchmark run into vLLM-style keys.

    `duration_s` is the wall time of the measured phase (warm-up excluded). Throughputs count
    only successful requests; `error_rate` is failed / sent. With `goodput_fn` (True when a
    request met every per-request SLO; failed requests never count) the summary adds
    ``request_goodput`` (good requests / duration). With `slo` (per-request SLOs, slo.py) it adds
    ``slo_attainment``: the share of all requests, failed ones included, that met every SLO. When samples carry an intended send time
    (open loop) it adds the schedule lag (actual - intended send time) over all sent requests:
    ``mean_schedule_lag_ms``, ``p99_schedule_lag_ms``, ``max_schedule_lag_ms``. It always says
    how many requests were truncated (``truncated_requests``, among the failed) and how many
    answers had their tokens counted from the stream (``tokens_counted_from_stream``).
    """
    ok = [s for s in samples if s.ok]
    failed = len(samples) - len(ok)
    duration_s = max(duration_s, 1e-9)
    out: dict[str, float] = {
        "num_requests": float(len(samples)),
        "completed": float(len(ok)),
        "failed": float(failed),
        "error_rate": failed / len(samples) if samples else 1.0,
        "duration_s": duration_s,
        "total_input_tokens": float(sum(s.prompt_tokens for s in ok)),
        "total_output_tokens": float(sum(s.output_tokens for s in ok)),
        "request_throughput": len(ok) / duration_s,
        "output_throughput": sum(s.output_tokens for s in ok) / duration_s,
        "total_token_throughput": sum(s.prompt_tokens + s.output_tokens for s in ok) / duration_s,
        "mean_queue_wait_ms": (1000.0 * sum(s.queue_wait_s for s in samples) / len(samples) if samples else 0.0),
        "truncated_requests": float(sum(1 for s in samples if s.truncated)),
        "tokens_counted_from_stream": float(sum(1 for s in samples if s.tokens_from_stream)),
    }
    out.update(_stats("ttft", [s.ttft_s for s in ok if s.ttft_s is not None], failed))
    out.update(_stats("e2el", [s.e2el_s for s in ok if s.e2el_s is not None], failed))
    out.update(_stats("tpot", [t for s in ok if (t := s.tpot_s) is not None], failed))
    # ITL is pooled over all gaps of all requests; a failed request adds one +inf gap.
    out.update(_stats("itl", [g for s in ok for g in s.itl_s], failed))
    if goodput_fn is not None:
        out["request_goodput"] = sum(1 for s in ok if goodput_fn(s)) / duration_s
    if slo is not None:
        out["slo_attainment"] = slo.attainment(samples)
    lags = [1000.0 * lag for s in samples if (lag := s.schedule_lag_s) is not None]
    if lags:
        out["mean_schedule_lag_ms"] = sum(lags) / len(lags)
        out["p99_schedule_lag_ms"] = percentile(lags, 99)
        out["max_schedule_lag_ms"] = max(lags)
    return out


def sample_notes(samples: list[RequestSample]) -> list[str]:
    """What a reader of the run must know about its answers: truncations and token counts that
    came from the stream rather than the server's usage (empty when neither happened)."""
    notes: list[str] = []
    truncated = [s for s in samples if s.truncated]
    if truncated:
        notes.append(
            f"{len(truncated)} of {len(samples)} requests truncated (fewer output tokens than "
            f"max_tokens with ignore_eos, e.g. {truncated[0].error}): they count as failed. The "
            f"per-slot context may be too small for prompt + chat template + output, or the "
            f"server ignores ignore_eos"
        )
    counted = sum(1 for s in samples if s.tokens_from_stream)
    if counted:
        notes.append(
            f"{counted} of {len(samples)} answers carried no usage.completion_tokens: their output "
            f"tokens were counted from the stream (server timings, else one per content chunk)"
        )
    return notes


def truncation_note(metrics: dict[str, float]) -> str:
    """`` (3 truncated: answers shorter than max_tokens)`` when a run had truncated answers, for
    the reason a trial broke its error-rate target; else empty."""
    n = metrics.get("truncated_requests") or 0
    return f" ({n:.0f} truncated: answers shorter than max_tokens)" if n else ""
