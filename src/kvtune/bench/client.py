"""The async streaming load client: the only code that sends benchmark traffic at a server.

It warms the server up with requests of the real shape (left out of the metrics), then drives
either a closed loop of `workload.concurrency` users or an open loop that sends at precomputed,
seeded arrival times whatever the server does (see arrivals.py), over the OpenAI-compatible
streaming chat or completions API. Each request is timed on the client's monotonic clock by
stream.py (TTFT to the first *content* chunk, failures recorded rather than raised). A hung server
counts as a failed request once `workload.request_timeout_s` has passed; it never hangs the
benchmark. The open loop records intended and actual send times and flags the run
(`fell_behind`) when the client could not keep to its schedule.

Beside the client's figures it keeps the server's own: llama-server's per-request ``timings``
(server_timing.py: client TTFT minus server prompt time = queueing) and, with
``BenchOptions.scrape_metrics``, the ``/metrics`` counters' deltas and gauges sampled during the
measured phase (server_metrics.py: vLLM's preemptions, KV-cache usage, waiting requests;
llama-server's with ``--metrics``). What a run needs beside the workload is one `BenchOptions`.

An API key goes only into the ``Authorization`` header: it is never logged, never part of
`BenchRun.to_dict()`, and scrubbed from error texts a server echoes back.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import httpx

from kvtune.bench.arrivals import arrival_offsets, arrival_offsets_for
from kvtune.bench.datasets import load_prompts
from kvtune.bench.prompts import PromptSource
from kvtune.bench.server_metrics import METRICS_INTERVAL_S, METRICS_PATH, Scraper
from kvtune.bench.server_timing import max_concurrency, server_timing_summary
from kvtune.bench.stream import CHAT_PATH, COMPLETIONS_PATH, build_body, one_request, redact
from kvtune.bench.tokenizer import Tokenizer, try_load_tokenizer
from kvtune.workload import Workload
from kvtune.errors import SpecError
from kvtune.objectives.metrics import RequestSample, sample_notes, summarize
# The open loop fell behind when the p99 send lag exceeds max(50 ms, 10% of the mean gap).
FELL_BEHIND_MIN_S = 0.050
FELL_BEHIND_GAP_FRACTION = 0.10
# Seconds between creating the open-loop schedule and its first due time.
_OPEN_LEAD_S = 0.005


@dataclass
class BenchRun:
    """One measured run. `metrics` = ``summarize(samples, duration_s)`` plus the server-timing
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
    with the samples it heard (`BenchRun.stopped` holds the reason).
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


class _Stopper:
    """Hands finished measured requests to `stop_when` and, once it gives a reason, cancels the
    tasks of the phase (requests in flight, the open loop's sender). A sample that finishes after
    the reason is dropped, so the run keeps exactly the samples `stop_when` heard."""

    def __init__(self, stop_when: Callable[[RequestSample], str | None] | None) -> None:
        self.stop_when = stop_when
        self.reason: str | None = None
        self.tasks: list[asyncio.Task] = []
        self.sent = 0  # requests sent in the phase, the ones a stop cancels included

    def keep(self, sample: RequestSample) -> bool:
        """Whether to record `sample`; the one that decides the stop is recorded."""
        if self.reason is not None:
            return False
        if self.stop_when is not None:
            self.reason = self.stop_when(sample)
            if self.reason is not None:
                me = asyncio.current_task()
                for t in self.tasks:
                    if t is not me:
                        t.cancel()
        return True

    async def gather(self) -> None:
        """Wait for the phase's tasks; cancelled ones are the early stop, not an error."""
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                raise r


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


def _span(samples: list[RequestSample]) -> float:
    """First send to last end of a phase."""
    if not samples:
        return 0.0
    return max(s.end_time or s.send_time for s in samples) - min(s.send_time for s in samples)


async def _closed_loop(client: httpx.AsyncClient, url: str, body: Callable[[int], dict],
                       count: int | None, concurrency: int, timeout_s: float,
                       duration_s: float | None = None, secret: str | None = None,
                       ramp_s: float = 0.0, stopper: _Stopper | None = None,
                       ) -> tuple[list[RequestSample], float]:
    """`concurrency` workers take requests 0, 1, ... in order until `count` are taken or
    `duration_s` has passed since the start (or `stopper` stops the run); returns samples and
    first-send..last-end. With `ramp_s` the first request of each worker is due
    ``i * ramp_s / workers`` after the start (users ramp in); later requests are due at the
    start, as without a ramp."""
    samples: dict[int, RequestSample] = {}
    next_index = 0
    start = time.perf_counter()
    deadline = math.inf if duration_s is None else start + duration_s
    n_workers = concurrency if count is None else min(concurrency, count)
    stop = stopper or _Stopper(None)

    async def worker() -> None:
        nonlocal next_index
        while (count is None or next_index < count) and time.perf_counter() < deadline \
                and stop.reason is None:
            i = next_index
            next_index += 1
            due = start + ramp_offset(i, n_workers, ramp_s)
            if due > time.perf_counter():
                await asyncio.sleep(due - time.perf_counter())
            stop.sent += 1
            sample = await one_request(client, url, body(i), timeout_s, due, None, secret)
            if stop.keep(sample):
                samples[i] = sample

    stop.tasks = [asyncio.create_task(worker()) for _ in range(n_workers)]
    await stop.gather()
    done = [samples[i] for i in sorted(samples)]
    return done, _span(done)


def ramp_offset(i: int, users: int, ramp_s: float) -> float:
    """Seconds after the phase start that request `i` of a closed loop of `users` is due: the
    first `users` requests spread evenly over `ramp_s`, every later one at once."""
    if ramp_s <= 0 or users <= 1 or i >= users:
        return 0.0
    return ramp_s * i / users


async def _open_loop(client: httpx.AsyncClient, url: str, bodies: list[dict],
                     offsets: list[float], timeout_s: float, secret: str | None = None,
                     stopper: _Stopper | None = None) -> tuple[list[RequestSample], float]:
    """Send request i at ``start + offsets[i]`` whatever the earlier ones are doing; a request
    the scheduler reaches late is sent at once (its lag is recorded, nothing is skipped until
    `stopper` stops the run: then nothing more is sent)."""
    start = time.perf_counter() + _OPEN_LEAD_S
    stop = stopper or _Stopper(None)
    samples: dict[int, RequestSample] = {}

    async def send(i: int, due: float) -> None:
        stop.sent += 1
        sample = await one_request(client, url, bodies[i], timeout_s, due, due, secret)
        if stop.keep(sample):
            samples[i] = sample

    async def sender() -> None:
        for i, off in enumerate(offsets):
            due = start + off
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            stop.tasks.append(asyncio.create_task(send(i, due)))

    stop.tasks.append(asyncio.create_task(sender()))
    # every request is sent (or the stop cancelled the sender) before the waiting starts
    await asyncio.gather(stop.tasks[0], return_exceptions=True)
    await stop.gather()
    done = [samples[i] for i in sorted(samples)]
    return done, _span(done)


# -- the benchmark ------------------------------------------------------------------------------

def _prompt_source(workload: Workload, salt: str, tokenizer: Tokenizer | str | Path | None,
                   notes: list[str]) -> tuple[PromptSource, str]:
    tok: Tokenizer | None
    if isinstance(tokenizer, Tokenizer):
        tok, note = tokenizer, f"prompt sizes exact for {tokenizer.name}"
        if not tok.single_token_words():
            note = f"{tok.name} has no single-token words: synthetic prompt sizes are approximate"
    else:
        tok, note = try_load_tokenizer(tokenizer)
    if workload.dataset is not None:
        count = tok.count if tok is not None else None
        data = load_prompts(workload.dataset, count=count,
                            count_exact=bool(tok is not None and tok.exact_count),
                            min_tokens=workload.dataset_min_tokens,
                            max_tokens=workload.dataset_max_tokens)
        exact_count = tok.count if tok is not None and tok.exact_count else None
        src = PromptSource(workload, salt, dataset=data.prompts, count=exact_count,
                           words=tok.single_token_words() if tok is not None else None)
        notes.append(data.describe() + "; each prompt is prefixed by a unique nonce")
        return src, data.describe()
    words = tok.single_token_words() if tok is not None else []
    notes.append(note)
    desc = (f"synthetic, exactly {workload.prompt_tokens} tokens of prompt text ({tok and tok.name}; "
            f"chat template not counted)" if words else
            f"synthetic, about {workload.prompt_tokens} tokens (approximation: ~1 token per "
            f"common English word, nonce ~10 tokens)")
    if workload.shared_prefix_fraction > 0:
        desc += (f", after a {workload.shared_prefix_tokens}-token system prompt shared by "
                 f"{workload.shared_prefix_fraction:.0%} of requests (unique for the others)")
    return PromptSource(workload, salt, words=words), desc


async def run_benchmark(base_url: str, workload: Workload, options: BenchOptions) -> BenchRun:
    """Warm up, then measure the workload (closed or open loop).

    Phases are reported as ``on_phase("warmup")`` (only when warm-up requests > 0) then
    ``on_phase("measuring")``. Warm-up is always a closed loop of `workload.concurrency` users
    and is left out of the metrics. Per-request failures (HTTP status, connection errors, error
    objects in the stream, empty streams, `request_timeout_s`) become ``ok=False`` samples and are
    never raised. In the closed loop `queue_wait_s` is the time from the start of the phase (when
    every request is due) until a free worker sent it; in the open loop it is the send lag behind
    the schedule (also ``schedule_lag_s``). `duration_s` runs from the first send to the last
    completion of the measured phase. Output tokens come from ``usage`` and are counted from the
    stream only when the server sent none (the notes say so); with ``ignore_eos`` an answer
    shorter than ``max_tokens`` is a failed, truncated request (stream.py). Each run salts the
    prompt nonces afresh, so repeated runs against one server do not hit its prefix cache either.
    `options.ramp_s` staggers the closed loop's users. Without a tokenizer
    synthetic prompts are approximate and `BenchRun.prompt_tokens_exact` is False. Bad input
    (dataset file, tokenizer path) raises `SpecError` before any request is sent.
    """
    workload.validate()
    o = options
    api_key, on_phase = o.api_key, o.on_phase
    path = COMPLETIONS_PATH if workload.endpoint == "completions" else CHAT_PATH
    base = base_url.rstrip("/")
    url = base + path
    salt = os.urandom(4).hex()
    notes: list[str] = []
    source, source_desc = _prompt_source(workload, salt, o.tokenizer, notes)

    def body(i: int) -> dict:
        return build_body(o.model, source.prompt(i), workload, o.extra_body)

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(connect=10, read=None, write=30, pool=None)
    w0 = workload.warmup_requests
    fell_behind = False
    server_metrics = None
    async with httpx.AsyncClient(limits=limits, timeout=timeout, transport=o.transport,
                                 headers=headers) as client:
        warmup: list[RequestSample] = []
        if w0 > 0:
            if on_phase:
                on_phase("warmup")
            warmup, _ = await _closed_loop(client, url, body, w0, workload.concurrency,
                                           workload.request_timeout_s, secret=api_key,
                                           ramp_s=o.ramp_s)
        offsets: list[float] = []
        bodies: list[dict] = []
        if workload.mode == "open":
            assert workload.rate is not None
            if workload.duration_s is not None:
                offsets = arrival_offsets_for(workload.duration_s, workload.rate, workload.arrival,
                                              workload.burstiness, workload.seed)
            else:
                offsets = arrival_offsets(workload.num_requests, workload.rate, workload.arrival,
                                          workload.burstiness, workload.seed)
            bodies = [body(w0 + i) for i in range(len(offsets))]  # built before the clock runs
        scraper = Scraper(client, base + METRICS_PATH, o.metrics_interval_s, api_key) \
            if o.scrape_metrics else None
        if scraper is not None:
            await scraper.start()
        if on_phase:
            on_phase("measuring")
        stopper = _Stopper(o.stop_when)
        planned: int | None
        if workload.mode == "open":
            planned = len(offsets)
            samples, duration_s = await _open_loop(client, url, bodies, offsets,
                                                   workload.request_timeout_s, api_key, stopper)
        elif workload.duration_s is not None:
            planned = None
            samples, duration_s = await _closed_loop(
                client, url, lambda i: body(w0 + i), None, workload.concurrency,
                workload.request_timeout_s, workload.duration_s, api_key, o.ramp_s, stopper)
        else:
            planned = workload.num_requests
            prebuilt = [body(w0 + i) for i in range(workload.num_requests)]
            samples, duration_s = await _closed_loop(
                client, url, prebuilt.__getitem__, workload.num_requests, workload.concurrency,
                workload.request_timeout_s, secret=api_key, ramp_s=o.ramp_s, stopper=stopper)
        if scraper is not None:
            server_metrics = await scraper.finish()
    metrics = summarize(samples, duration_s, o.goodput_fn)
    notes.extend(sample_notes(samples))
    metrics.update(server_timing_summary(samples))
    metrics["max_concurrent_requests"] = float(max_concurrency(samples))
    if workload.mode == "open" and samples:
        assert workload.rate is not None
        threshold_s = max(FELL_BEHIND_MIN_S, FELL_BEHIND_GAP_FRACTION / workload.rate)
        metrics["schedule_lag_threshold_ms"] = 1000.0 * threshold_s
        metrics["offered_rate"] = workload.rate
        fell_behind = metrics.get("p99_schedule_lag_ms", 0.0) > 1000.0 * threshold_s
        metrics["fell_behind"] = 1.0 if fell_behind else 0.0
        if fell_behind:
            notes.append(
                f"client fell behind its schedule: p99 send lag "
                f"{metrics['p99_schedule_lag_ms']:.0f} ms > {1000 * threshold_s:.0f} ms, so the "
                f"server got less than {workload.rate:g} req/s; the client (CPU, event loop) may be "
                f"the bottleneck, not the server")
    return BenchRun(samples, warmup, duration_s, metrics, mode=workload.mode,
                    fell_behind=fell_behind, prompt_tokens_exact=source.exact,
                    prompt_source=source_desc, server_metrics=server_metrics,
                    workload=workload.to_dict(), endpoint=path, notes=notes,
                    stopped=stopper.reason, planned=planned, sent=stopper.sent)


def run(base_url: str, workload: Workload, options: BenchOptions) -> BenchRun:
    """Synchronous `run_benchmark` (``asyncio.run``; not callable from inside a running loop)."""
    return asyncio.run(run_benchmark(base_url, workload, options))


def detect_model(base_url: str, *, api_key: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> str:
    """The first model id the server lists at /v1/models (for `kvtune bench` without --model)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    url = base_url.rstrip("/") + "/v1/models"
    try:
        with httpx.Client(timeout=10.0, headers=headers, transport=transport) as c:
            r = c.get(url)
    except httpx.HTTPError as e:
        raise SpecError(redact(f"cannot reach {url}: {type(e).__name__}: {e}", api_key)) from e
    if r.status_code != 200:
        hint = " (check --api-key / OPENAI_API_KEY)" if r.status_code in (401, 403) else ""
        raise SpecError(f"{url} answered HTTP {r.status_code}{hint}; pass --model")
    try:
        data = r.json().get("data") or []
        return str(data[0]["id"])
    except (ValueError, AttributeError, LookupError, TypeError):
        raise SpecError(f"{url} lists no model; pass --model") from None
