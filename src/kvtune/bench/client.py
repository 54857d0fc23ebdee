"""The async streaming load client: the only code that sends benchmark traffic at a server.

It warms the server up with requests of the real shape (left out of the metrics), then drives
either a closed loop of `workload.concurrency` users or an open loop that sends at precomputed,
seeded arrival times whatever the server does (loops.py, arrivals.py), over the OpenAI-compatible
streaming chat or completions API. Each request is timed on the options' clock by stream.py
(TTFT to the first *content* chunk, failures recorded rather than raised). A hung server counts
as a failed request once `workload.request_timeout_s` has passed; it never hangs the benchmark.
The open loop records intended and actual send times and flags the run (`fell_behind`) when the
client could not keep to its schedule.

Beside the client's figures it keeps the server's own: llama-server's per-request ``timings``
(server_timing.py: client TTFT minus server prompt time = queueing) and, with
``BenchOptions.scrape_metrics``, the ``/metrics`` counters' deltas and gauges sampled during the
measured phase (server_metrics.py: vLLM's preemptions, KV-cache usage, waiting requests;
llama-server's with ``--metrics``). What a run needs beside the workload is one `BenchOptions`
(options.py).

An API key goes only into the ``Authorization`` header: it is never logged, never part of
`BenchRun.to_dict()`, and scrubbed from error texts a server echoes back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import httpx

from kvtune.bench.arrivals import arrival_offsets, arrival_offsets_for
from kvtune.bench.conversations import conversation_source
from kvtune.bench.datasets import load_prompts
from kvtune.bench.lengths import prompt_size_words
from kvtune.bench.loops import OPEN_LEAD_S, Stopper, closed_loop, fell_behind_schedule, open_loop, ramp_offset
from kvtune.bench.multiturn import ConversationLoop, conversation_starts, planned_turns, turn_metrics
from kvtune.bench.options import BenchOptions, BenchRun, resolve_api_key, slo_goodput
from kvtune.bench.prefix_reuse import hit_rate_note, prefix_cache_hit_rate
from kvtune.bench.prompts import PromptSource
from kvtune.bench.server_metrics import METRICS_PATH, Scraper
from kvtune.bench.server_timing import max_concurrency, server_timing_summary
from kvtune.bench.stream import CHAT_PATH, COMPLETIONS_PATH, build_body, chat_body, redact_secret
from kvtune.bench.tokenizer import Tokenizer, try_load_tokenizer
from kvtune.bench.trace_prompts import TracePromptSource
from kvtune.bench.traces import fitted_trace
from kvtune.bench.vllm_counters import acceptance_from
from kvtune.errors import SpecError
from kvtune.objectives.metrics import RequestSample, sample_notes, summarize_requests
from kvtune.workload import Workload

__all__ = [
    "BenchOptions",
    "BenchRun",
    "OPEN_LEAD_S",
    "detect_model",
    "ramp_offset",
    "resolve_api_key",
    "run",
    "run_benchmark",
    "slo_goodput",
]


def _tokenizer(tokenizer: Tokenizer | str | Path | None) -> tuple[Tokenizer | None, str]:
    if isinstance(tokenizer, Tokenizer):
        note = f"prompt sizes exact for {tokenizer.name}"
        if not tokenizer.single_token_words():
            note = f"{tokenizer.name} has no single-token words: synthetic prompt sizes are approximate"
        return tokenizer, note
    return try_load_tokenizer(tokenizer)


def _trace_source(
    workload: Workload, salt: str, tokenizer: Tokenizer | str | Path | None, notes: list[str]
) -> tuple[TracePromptSource, str]:
    """The trace, fitted to the workload's window/count/speed/scale/clip, and its prompts."""
    fitted = fitted_trace(workload)
    tok, note = _tokenizer(tokenizer)
    words = tok.single_token_words() if tok is not None else []
    source = TracePromptSource(fitted, workload.seed, salt, workload.warmup_requests, words)
    desc = fitted.describe()
    notes.extend([note, desc])
    return source, desc


def _prompt_source(
    workload: Workload, salt: str, tokenizer: Tokenizer | str | Path | None, notes: list[str]
) -> tuple[PromptSource | TracePromptSource, str]:
    if workload.trace is not None:
        return _trace_source(workload, salt, tokenizer, notes)
    tok, note = _tokenizer(tokenizer)
    if workload.dataset is not None:
        count = tok.count if tok is not None else None
        data = load_prompts(
            workload.dataset,
            count=count,
            count_exact=bool(tok is not None and tok.exact_count),
            min_tokens=workload.dataset_min_tokens,
            max_tokens=workload.dataset_max_tokens,
        )
        exact_count = tok.count if tok is not None and tok.exact_count else None
        src = PromptSource(
            workload,
            salt,
            dataset=data.prompts,
            count=exact_count,
            words=tok.single_token_words() if tok is not None else None,
        )
        notes.append(data.describe() + "; each prompt is prefixed by a unique nonce")
        return src, data.describe()
    words = tok.single_token_words() if tok is not None else []
    notes.append(note)
    desc = (
        f"synthetic, exactly {prompt_size_words(workload)} tokens of prompt text ({tok and tok.name}; "
        f"chat template not counted)"
        if words
        else f"synthetic, about {prompt_size_words(workload)} tokens (approximation: ~1 token per "
        f"common English word, nonce ~10 tokens)"
    )
    if workload.shared_prefix_fraction > 0:
        k = workload.shared_prefix_groups
        desc += (
            f", after a {workload.shared_prefix_tokens}-token system prompt shared by "
            f"{workload.shared_prefix_fraction:.0%} of requests{f' in {k} groups' if k > 1 else ''} (unique for the others)"
        )
    return PromptSource(workload, salt, words=words), desc


def _body_maker(o: BenchOptions, source: PromptSource | TracePromptSource, workload: Workload) -> Callable[[int], dict]:
    """Request `i`'s JSON body, asking for the source's output length of request `i` (a trace's
    own, or one drawn from the workload's output spread)."""

    def body(i: int) -> dict:
        b = build_body(o.model, source.prompt(i), workload, o.extra_body)
        b["max_tokens"] = source.output_tokens(i)
        return b

    return body


def _http_client(o: BenchOptions) -> httpx.AsyncClient:
    """One client for a run: unbounded connections (the workload sets the concurrency), no read
    timeout of its own (`request_timeout_s` bounds each request), the API key as a bearer token."""
    headers = {"Authorization": f"Bearer {o.api_key}"} if o.api_key else None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(connect=10, read=None, write=30, pool=None)
    return httpx.AsyncClient(limits=limits, timeout=timeout, transport=o.transport, headers=headers)


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
    if workload.multiturn:
        return await _run_conversations(base_url.rstrip("/"), workload, o)
    path, base = (COMPLETIONS_PATH if workload.endpoint == "completions" else CHAT_PATH), base_url.rstrip("/")
    notes: list[str] = []
    source, source_desc = _prompt_source(workload, os.urandom(4).hex(), o.tokenizer, notes)

    body = _body_maker(o, source, workload)
    stopper = Stopper(o.stop_when)
    server_metrics = None
    async with _http_client(o) as client:
        warmup = await _warm_up(client, base + path, body, workload, o)
        offsets = source.fitted.offsets if isinstance(source, TracePromptSource) else _schedule(workload)
        bodies = [body(workload.warmup_requests + i) for i in range(len(offsets))]  # before the clock runs
        scraper = Scraper(client, base + METRICS_PATH, o.metrics_interval_s, o.api_key) if o.scrape_metrics else None
        if scraper is not None:
            await scraper.start()
        if o.on_phase:
            o.on_phase("measuring")
        samples, duration_s, planned = await _measure(client, base + path, body, bodies, offsets, workload, o, stopper)
        if scraper is not None:
            server_metrics = await scraper.finish()
    metrics = {**acceptance_from(server_metrics), **_summary(samples, duration_s, o, notes, server_metrics)}
    fell_behind = fell_behind_schedule(_offered_rate(workload, offsets), samples, metrics, notes)
    return BenchRun(
        samples,
        warmup,
        duration_s,
        metrics,
        mode="open" if workload.trace is not None else workload.mode,
        fell_behind=fell_behind,
        prompt_tokens_exact=source.exact,
        prompt_source=source_desc,
        server_metrics=server_metrics,
        workload=workload.to_dict(),
        endpoint=path,
        notes=notes,
        stopped=stopper.reason,
        planned=planned,
        sent=stopper.sent,
    )


async def _warm_up(
    client: httpx.AsyncClient, url: str, body: Callable[[int], dict], workload: Workload, o: BenchOptions
) -> list[RequestSample]:
    """The warm-up: a closed loop of `workload.concurrency` users, kept out of the metrics."""
    if workload.warmup_requests <= 0:
        return []
    if o.on_phase:
        o.on_phase("warmup")
    warmup, _ = await closed_loop(
        client,
        url,
        body,
        workload.warmup_requests,
        workload.concurrency,
        workload.request_timeout_s,
        secret=o.api_key,
        ramp_s=o.ramp_s,
        clock=o.clock,
    )
    return warmup


def _schedule(workload: Workload) -> list[float]:
    """The open loop's send offsets (seconds from the phase start); none for a closed loop."""
    if workload.mode != "open":
        return []
    assert workload.rate is not None
    if workload.duration_s is not None:
        return arrival_offsets_for(
            workload.duration_s, workload.rate, workload.arrival, workload.burstiness, workload.seed
        )
    return arrival_offsets(workload.num_requests, workload.rate, workload.arrival, workload.burstiness, workload.seed)


async def _measure(
    client: httpx.AsyncClient,
    url: str,
    body: Callable[[int], dict],
    bodies: list[dict],
    offsets: list[float],
    workload: Workload,
    o: BenchOptions,
    stopper: Stopper,
) -> tuple[list[RequestSample], float, int | None]:
    """The measured phase: (samples, first send to last end, requests planned or None)."""
    w0, timeout_s = workload.warmup_requests, workload.request_timeout_s
    if workload.mode == "open" or workload.trace is not None:
        samples, duration_s = await open_loop(client, url, bodies, offsets, timeout_s, o.api_key, stopper, o.clock)
        return samples, duration_s, len(offsets)
    if workload.duration_s is not None:
        samples, duration_s = await closed_loop(
            client,
            url,
            lambda i: body(w0 + i),
            None,
            workload.concurrency,
            timeout_s,
            workload.duration_s,
            o.api_key,
            o.ramp_s,
            stopper,
            o.clock,
        )
        return samples, duration_s, None
    prebuilt = [body(w0 + i) for i in range(workload.num_requests)]
    samples, duration_s = await closed_loop(
        client,
        url,
        prebuilt.__getitem__,
        workload.num_requests,
        workload.concurrency,
        timeout_s,
        secret=o.api_key,
        ramp_s=o.ramp_s,
        stopper=stopper,
        clock=o.clock,
    )
    return samples, duration_s, workload.num_requests


def _summary(
    samples: list[RequestSample], duration_s: float, o: BenchOptions, notes: list[str], server: dict | None
) -> dict[str, float]:
    """The run's metrics: the requests', llama-server's timing split, the turns', the hit rate."""
    metrics = summarize_requests(samples, duration_s, o.goodput_fn, o.slo)
    notes.extend(sample_notes(samples))
    metrics.update(server_timing_summary(samples))
    metrics.update(turn_metrics(samples))
    metrics["max_concurrent_requests"] = float(max_concurrency(samples))
    metrics["prefix_cache_hit_rate"] = prefix_cache_hit_rate(samples, [server])
    notes.append(hit_rate_note(metrics["prefix_cache_hit_rate"]))
    return metrics


async def _run_conversations(base: str, workload: Workload, o: BenchOptions) -> BenchRun:
    """The multi-turn workload (multiturn.py): warm-up conversations of one turn each, then
    `workload.conversations` conversations over `workload.concurrency` users."""
    tok, note = _tokenizer(o.tokenizer)
    words = tok.single_token_words() if tok is not None else []
    count = tok.count if tok is not None else None
    source = conversation_source(workload, os.urandom(4).hex(), words, count)
    notes = [note, source.describe()]
    stopper = Stopper(o.stop_when)
    server_metrics = None
    async with _http_client(o) as client:
        body = lambda messages: chat_body(o.model, messages, workload, o.extra_body)  # noqa: E731
        loop = ConversationLoop(client, base + CHAT_PATH, source, body, workload, o.api_key, o.clock)
        warmup: list[RequestSample] = []
        if workload.warmup_requests > 0:
            if o.on_phase:
                o.on_phase("warmup")
            one_turn = ConversationLoop(client, loop.url, source, loop.body, workload, o.api_key, o.clock, max_turns=1)
            warmup, _ = await one_turn.run(-workload.warmup_requests, workload.warmup_requests, workload.concurrency)
        scraper = Scraper(client, base + METRICS_PATH, o.metrics_interval_s, o.api_key) if o.scrape_metrics else None
        if scraper is not None:
            await scraper.start()
        if o.on_phase:
            o.on_phase("measuring")
        if workload.mode == "open":  # sessions start at the schedule's times, not as users free up
            samples, duration_s = await loop.run_open(conversation_starts(workload), stopper)
        else:
            samples, duration_s = await loop.run(0, workload.conversations, workload.concurrency, stopper)
        if scraper is not None:
            server_metrics = await scraper.finish()
    notes.append(loop.stats.describe())
    metrics = _summary(samples, duration_s, o, notes, server_metrics)
    metrics["conversations_cut_by_context"] = float(loop.stats.cut_by_context)
    rate = workload.rate if workload.mode == "open" else None
    behind = fell_behind_schedule(rate, samples, metrics, notes, "conversations/s")
    return BenchRun(
        samples, warmup, duration_s, metrics, mode=workload.mode, fell_behind=behind,
        prompt_tokens_exact=source.exact, prompt_source=source.describe(),
        server_metrics=server_metrics, workload=workload.to_dict(), endpoint=CHAT_PATH, notes=notes,
        stopped=stopper.reason, planned=planned_turns(workload), sent=stopper.sent,
    )  # fmt: skip


def _offered_rate(workload: Workload, offsets: list[float]) -> float | None:
    """Requests per second the open loop offers: the workload's rate, or a trace's mean rate."""
    if workload.trace is not None:
        return (len(offsets) - 1) / offsets[-1] if len(offsets) > 1 and offsets[-1] > 0 else None
    return workload.rate if workload.mode == "open" else None


def run(base_url: str, workload: Workload, options: BenchOptions) -> BenchRun:
    """Synchronous `run_benchmark` on ``options.clock.run`` (the real clock: ``asyncio.run``; not
    callable from inside a running loop)."""
    return options.clock.run(run_benchmark(base_url, workload, options))


def detect_model(base_url: str, *, api_key: str | None = None, transport: httpx.BaseTransport | None = None) -> str:
    """The first model id the server lists at /v1/models (for `kvtune bench` without --model)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    url = base_url.rstrip("/") + "/v1/models"
    try:
        with httpx.Client(timeout=10.0, headers=headers, transport=transport) as c:
            r = c.get(url)
    except httpx.HTTPError as e:
        raise SpecError(redact_secret(f"cannot reach {url}: {type(e).__name__}: {e}", api_key)) from e
    if r.status_code != 200:
        hint = " (check --api-key / OPENAI_API_KEY)" if r.status_code in (401, 403) else ""
        raise SpecError(f"{url} answered HTTP {r.status_code}{hint}; pass --model")
    try:
        data = r.json().get("data") or []
        return str(data[0]["id"])
    except (ValueError, AttributeError, LookupError, TypeError):
        raise SpecError(f"{url} lists no model; pass --model") from None
