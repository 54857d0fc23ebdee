"""What a benchmark run is given (`BenchOptions`) and what it gives back (`BenchRun`).

An API key goes only into the ``Authorization`` header: it is never logged, never part of
`BenchRun.to_dict()`, and scrubbed from error texts a server echoes back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import httpx

from kvtune.bench.server_metrics import METRICS_INTERVAL_S
from kvtune.bench.stream import CHAT_PATH
from kvtune.bench.tokenizer import Tokenizer
from kvtune.clock import REAL_CLOCK, Clock
from kvtune.errors import SpecError
from kvtune.objectives.metrics import RequestSample
from kvtune.objectives.slo import Slo


@dataclass
class BenchRun:
    """One measured run. `metrics` = ``summarize_requests(samples, duration_s)`` plus the server-timing
    split and schedule keys; warm-up is kept apart. `server_metrics` holds the /metrics
    deltas and gauges when scraped. Never holds the API key."""

    samples: list[RequestSample]
    warmup_samples: list[RequestSample]
    duration_s: float
    metrics: dict[str, float]
    mode: str = "closed"
    fell_behind: bool = False
    prompt_tokens_exact: bool = False
    prompt_source: str = ""
    server_metrics: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None
    endpoint: str = CHAT_PATH
    notes: list[str] = field(default_factory=list)
    # Early stop: the reason `BenchOptions.stop_when` gave (the rest were cancelled), the
    # measured requests the run planned (None: a timed closed loop has no planned count), and
    # those it sent (the cancelled ones included).
    stopped: str | None = None
    planned: int | None = None
    sent: int = 0

    @property
    def observed(self) -> int:
        """Measured requests that finished (all of them, unless the run was stopped early)."""
        return len(self.samples)

    def to_dict(self) -> dict[str, Any]:
        """Plain data; note `metrics` may hold inf (failed requests) and nan (no data)."""
        return {
            "duration_s": self.duration_s,
            "metrics": dict(self.metrics),
            "samples": [s.to_dict() for s in self.samples],
            "warmup_samples": [s.to_dict() for s in self.warmup_samples],
            "mode": self.mode,
            "fell_behind": self.fell_behind,
            "prompt_tokens_exact": self.prompt_tokens_exact,
            "prompt_source": self.prompt_source,
            "server_metrics": self.server_metrics,
            "workload": self.workload,
            "endpoint": self.endpoint,
            "notes": list(self.notes),
            "stopped": self.stopped,
            "planned": self.planned,
            "sent": self.sent,
        }


@dataclass(frozen=True)
class BenchOptions:
    """Everything a benchmark run needs beside the server's URL and the workload.

    `model` is the ``model`` field requests send. `extra_body` is merged over the request JSON
    (llama-server: ``{"cache_prompt": False}``). `api_key` is sent as ``Authorization: Bearer``
    and kept nowhere else. `tokenizer` (a Tokenizer, or a GGUF file / HF folder path) makes
    synthetic prompts exact. `goodput_fn` adds ``request_goodput``; `scrape_metrics` fills
    `BenchRun.server_metrics` from ``/metrics`` (every `metrics_interval_s`). `on_phase` hears
    ``"warmup"`` and ``"measuring"``. `transport` replaces the network (tests: httpx.MockTransport).
    `ramp_s` staggers the closed loop's users: user k sends its first request ``k * ramp_s / n``
    after the phase starts (warm-up and measured phase alike), so a level is not one burst of n
    simultaneous prompts (the capacity search ramps over one typical request duration).
    `stop_when` hears each measured request (never warm-up) as it finishes; the first time it
    returns a reason, the requests in flight are cancelled, none is sent after, and the run ends
    with the samples it heard (`BenchRun.stopped` holds the reason). `clock` times every request
    and runs the event loop (tests: a virtual clock, with a transport that waits on it).
    `slo` (per-request SLOs) adds ``slo_attainment`` to the metrics.
    """

    model: str
    extra_body: dict | None = None
    api_key: str | None = None
    tokenizer: Tokenizer | str | Path | None = None
    goodput_fn: Callable[[RequestSample], bool] | None = None
    scrape_metrics: bool = False
    metrics_interval_s: float = METRICS_INTERVAL_S
    on_phase: Callable[[str], None] | None = None
    transport: httpx.AsyncBaseTransport | None = None
    ramp_s: float = 0.0
    stop_when: Callable[[RequestSample], str | None] | None = None
    clock: Clock = REAL_CLOCK
    slo: Slo | None = None


def resolve_api_key(explicit: str | None = None) -> str | None:
    """``--api-key`` if given, else $OPENAI_API_KEY, else None (local servers need none)."""
    return explicit or os.environ.get("OPENAI_API_KEY") or None


def slo_goodput(slos_ms: Mapping[str, float]) -> Callable[[RequestSample], bool]:
    """A per-request SLO check for ``request_goodput``, as vLLM's ``--goodput ttft:500 tpot:50``:
    keys ttft, tpot, e2el (ms). A failed request never meets it; TPOT of a one-token answer is 0."""
    unknown = set(slos_ms) - {"ttft", "tpot", "e2el"}
    if unknown:
        raise SpecError(f"unknown goodput SLO(s) {sorted(unknown)}: use ttft, tpot, e2el (ms)")
    limits = {k: float(v) / 1000.0 for k, v in slos_ms.items()}

    def met(s: RequestSample) -> bool:
        if not s.ok:
            return False
        values = {"ttft": s.ttft_s, "e2el": s.e2el_s, "tpot": s.tpot_s or 0.0}
        return all((v := values[k]) is not None and v <= lim for k, lim in limits.items())

    return met
