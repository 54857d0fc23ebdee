"""The async streaming load client: the only code that sends benchmark traffic at a server.

It warms the server up with requests of the real shape (left out of the metrics), then drives
either a closed loop of `workload.concurrency` users or an open loop that sends at precomputed,
seeded arrival times whatever the server does (see arrivals.py), over the OpenAI-compatible
streaming chat or completions API. Each request is timed on the client's monotonic clock with
the definitions of ../shared/MEASUREMENT.md (TTFT to the first *content* chunk, E2EL to the last
content chunk, output tokens from ``usage``, failures recorded rather than raised). A hung server
counts as a failed request once `workload.request_timeout_s` has passed; it never hangs the
benchmark. The open loop records intended and actual send times and flags the run
(`fell_behind`) when the client could not keep to its schedule.

Beside the client's figures it keeps the server's own: llama-server's per-request ``timings``
(client TTFT minus server prompt time = queueing) and, with ``scrape_metrics=True``, the
``/metrics`` counters' deltas and gauges sampled every `METRICS_INTERVAL_S` during the measured
phase (vLLM's preemptions, KV-cache usage, waiting requests; llama-server's with ``--metrics``).

An API key goes only into the ``Authorization`` header: it is never logged, never part of
`BenchRun.to_dict()`, and scrubbed from error texts a server echoes back.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import httpx

from kvtune.bench.arrivals import arrival_offsets, arrival_offsets_for
from kvtune.bench.datasets import load_prompts
from kvtune.bench.prompts import Prompt, PromptSource
from kvtune.bench.tokenizer import Tokenizer, try_load_tokenizer
from kvtune.bench.workload import Workload
from kvtune.errors import SpecError
from kvtune.objectives.metrics import RequestSample, percentile, summarize

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
METRICS_PATH = "/metrics"
METRICS_INTERVAL_S = 0.5
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
        }


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
        return all(values[k] is not None and values[k] <= lim for k, lim in limits.items())
    return met


# -- requests -----------------------------------------------------------------------------------

def build_body(model: str, prompt: str | Prompt, workload: Workload,
               extra_body: dict | None) -> dict:
    """The request JSON: fixed output length (`ignore_eos`), usage in the stream, greedy.
    Chat sends a user message (after a system message in the shared-prefix workload);
    completions sends the text as ``prompt``."""
    if isinstance(prompt, str):
        prompt = Prompt(user=prompt)
    body: dict[str, Any] = {"model": model}
    if workload.endpoint == "completions":
        body["prompt"] = prompt.as_text()
    else:
        messages = [] if prompt.system is None else [{"role": "system", "content": prompt.system}]
        body["messages"] = messages + [{"role": "user", "content": prompt.user}]
    body.update({
        "max_tokens": workload.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0,
    })
    body.update(extra_body or {})
    return body


def _has_content(obj: dict[str, Any]) -> bool:
    for choice in obj.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):  # completions endpoint
            return True
        delta = choice.get("delta") or {}
        if any(delta.get(k) for k in ("content", "reasoning_content", "reasoning", "tool_calls")):
            return True
    return False


def _error_text(obj: Any) -> str:
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    msg = err.get("message", err) if isinstance(err, dict) else err
    return str(msg)[:200]


async def _stream(client: httpx.AsyncClient, url: str, body: dict, s: RequestSample) -> None:
    """Send one request and fill `s` in place; sets `s.ok` only on a complete, valid stream."""
    last: float | None = None
    content_chunks = 0
    usage: dict[str, Any] | None = None
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            text = (await resp.aread()).decode("utf-8", "replace")
            s.error = f"HTTP {resp.status_code}: {text[:200]}"
            return
        async for line in resp.aiter_lines():
            now = time.perf_counter()
            line = line.strip()
            if line.startswith("error:"):  # llama-server's SSE error event
                s.error = f"server error in stream: {_error_text(line[6:].strip())}"
                return
            if not line.startswith("data:"):
                continue  # blank separators, comments, event:/id: lines
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                obj = json.loads(data)
            except ValueError:
                s.error = f"invalid JSON in stream: {data[:200]}"
                return
            if not isinstance(obj, dict):
                continue
            if obj.get("error") or obj.get("object") == "error":
                s.error = f"server error in stream: {_error_text(obj)}"
                return
            if _has_content(obj):
                if last is None:
                    s.ttft_s = now - s.send_time
                else:
                    s.itl_s.append(now - last)
                last = now
                content_chunks += 1
            if obj.get("usage"):
                usage = obj["usage"]
            if obj.get("timings"):
                s.server_timings = obj["timings"]
    if last is None:
        s.error = "stream ended with no content"
        return
    s.e2el_s = last - s.send_time
    if usage is not None:
        s.output_tokens = int(usage.get("completion_tokens") or 0)
        s.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    else:
        s.output_tokens = content_chunks
    s.ok = True


def _redact(text: str, secret: str | None) -> str:
    if not secret:
        return text
    text = text.replace(secret, "***")
    if len(secret) > 12:  # servers that echo a partial key ("sk-abc...xyz")
        text = text.replace(secret[:8], "***").replace(secret[-6:], "***")
    return text


async def _one_request(client: httpx.AsyncClient, url: str, body: dict, timeout_s: float,
                       due: float, intended: float | None = None,
                       secret: str | None = None) -> RequestSample:
    s = RequestSample(send_time=time.perf_counter(), intended_send_time=intended)
    s.queue_wait_s = s.send_time - due
    try:
        await asyncio.wait_for(_stream(client, url, body, s), timeout_s)
    except asyncio.TimeoutError:
        s.ok = False
        s.error = f"timeout: no complete response within {timeout_s:g} s"
    except httpx.HTTPError as e:
        s.ok = False
        s.error = f"{type(e).__name__}: {e}"[:300]
    except (OSError, ValueError) as e:
        s.ok = False
        s.error = f"{type(e).__name__}: {e}"[:300]
    s.end_time = time.perf_counter()
    if s.error:
        s.error = _redact(s.error, secret)
    return s


def _span(samples: list[RequestSample]) -> float:
    """First send to last end of a phase."""
    if not samples:
        return 0.0
    return max(s.end_time or s.send_time for s in samples) - min(s.send_time for s in samples)


async def _closed_loop(client: httpx.AsyncClient, url: str, body: Callable[[int], dict],
                       count: int | None, concurrency: int, timeout_s: float,
                       duration_s: float | None = None, secret: str | None = None,
                       ) -> tuple[list[RequestSample], float]:
    """`concurrency` workers take requests 0, 1, ... in order until `count` are taken or
    `duration_s` has passed since the start; returns samples and first-send..last-end."""
    samples: dict[int, RequestSample] = {}
    next_index = 0
    start = time.perf_counter()
    deadline = math.inf if duration_s is None else start + duration_s

    async def worker() -> None:
        nonlocal next_index
        while (count is None or next_index < count) and time.perf_counter() < deadline:
            i = next_index
            next_index += 1
            samples[i] = await _one_request(client, url, body(i), timeout_s, start, None, secret)

    n_workers = concurrency if count is None else min(concurrency, count)
    await asyncio.gather(*(worker() for _ in range(n_workers)))
    done = [samples[i] for i in sorted(samples)]
    return done, _span(done)


async def _open_loop(client: httpx.AsyncClient, url: str, bodies: list[dict],
                     offsets: list[float], timeout_s: float, secret: str | None = None,
                     ) -> tuple[list[RequestSample], float]:
    """Send request i at ``start + offsets[i]`` whatever the earlier ones are doing; a request
    the scheduler reaches late is sent at once (its lag is recorded, nothing is skipped)."""
    start = time.perf_counter() + _OPEN_LEAD_S
    tasks: list[asyncio.Task] = []
    for i, off in enumerate(offsets):
        due = start + off
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(
            _one_request(client, url, bodies[i], timeout_s, due, due, secret)))
    done = list(await asyncio.gather(*tasks))
    return done, _span(done)


# -- server-side figures ------------------------------------------------------------------------

def server_timing_summary(samples: list[RequestSample]) -> dict[str, float]:
    """llama-server's per-request ``timings`` beside the client's TTFT (successful requests).

    ``prompt_ms`` excludes the wait for a free slot, so client TTFT - server prompt time is the
    queueing (plus HTTP and tokenization). Empty when the server sent no timings.
    """
    rows = [(1000.0 * s.ttft_s, s.server_timings) for s in samples
            if s.ok and s.ttft_s is not None and isinstance(s.server_timings, dict)
            and isinstance(s.server_timings.get("prompt_ms"), (int, float))]
    if not rows:
        return {}
    prompt = [float(t["prompt_ms"]) for _, t in rows]
    queue = [ttft - float(t["prompt_ms"]) for ttft, t in rows]
    out = {
        "server_timings_requests": float(len(rows)),
        "mean_prompt_ms_server": sum(prompt) / len(prompt),
        "median_prompt_ms_server": percentile(prompt, 50),
        "p99_prompt_ms_server": percentile(prompt, 99),
        "mean_queue_ms_server": sum(queue) / len(queue),
        "median_queue_ms_server": percentile(queue, 50),
        "p99_queue_ms_server": percentile(queue, 99),
    }
    decode = [float(t["predicted_ms"]) / (t["predicted_n"] - 1) for _, t in rows
              if isinstance(t.get("predicted_n"), (int, float)) and t["predicted_n"] > 1
              and isinstance(t.get("predicted_ms"), (int, float))]
    if decode:
        out["mean_tpot_ms_server"] = sum(decode) / len(decode)
    cached = [float(t["cache_n"]) for _, t in rows if isinstance(t.get("cache_n"), (int, float))]
    if cached:
        out["mean_cached_prompt_tokens_server"] = sum(cached) / len(cached)
    return out


def max_concurrency(samples: list[RequestSample]) -> int:
    """The most requests in flight at once (send..end intervals)."""
    events = sorted([(s.send_time, 1) for s in samples if s.end_time is not None]
                    + [(s.end_time, -1) for s in samples if s.end_time is not None],
                    key=lambda e: (e[0], e[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def parse_prometheus(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """Prometheus text -> ({metric name: value summed over label sets}, {name: TYPE}).
    Histogram buckets are skipped (their _sum and _count are kept)."""
    values: dict[str, float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3]
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            rest = rest.rpartition("}")[2]
        else:
            name, _, rest = line.partition(" ")
        name = name.strip()
        if name.endswith("_bucket"):
            continue
        try:
            v = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        values[name] = values.get(name, 0.0) + v
    return values, types


def _gauge_names(values: dict[str, float], types: dict[str, str]) -> list[str]:
    return [n for n in values if types.get(n) == "gauge"]


def metrics_delta(before: dict[str, float], after: dict[str, float], types: dict[str, str],
                  gauge_samples: list[dict[str, float]]) -> dict[str, Any]:
    """Counter and histogram-sum deltas, gauge max/mean over the samples, vLLM highlights."""
    deltas = {n: after[n] - before[n] for n in after if n in before and (
        n.endswith(("_total", "_sum", "_count")) or types.get(n) == "counter")}
    gauges: dict[str, dict[str, float]] = {}
    for n in _gauge_names(after, types):
        series = [g[n] for g in gauge_samples if n in g] or [after[n]]
        gauges[n] = {"max": max(series), "mean": sum(series) / len(series), "last": series[-1]}
    out: dict[str, Any] = {"available": True, "samples": len(gauge_samples),
                           "deltas": deltas, "gauges": gauges}
    means = {}
    for n, d in deltas.items():
        if n.endswith("_sum"):
            c = deltas.get(n[:-4] + "_count")
            if c:
                means[n[:-4]] = d / c
    out["histogram_means"] = means
    # vLLM's headline figures under stable names (older vLLM: gpu_cache_usage_perc).
    if "vllm:num_preemptions_total" in deltas:
        out["num_preemptions_delta"] = deltas["vllm:num_preemptions_total"]
    for name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"):
        if name in gauges:
            out["max_kv_cache_usage_perc"] = gauges[name]["max"]
            break
    if "vllm:num_requests_waiting" in gauges:
        out["max_num_requests_waiting"] = gauges["vllm:num_requests_waiting"]["max"]
        out["mean_num_requests_waiting"] = gauges["vllm:num_requests_waiting"]["mean"]
    if "vllm:num_requests_running" in gauges:
        out["max_num_requests_running"] = gauges["vllm:num_requests_running"]["max"]
    return out


class _Scraper:
    """GET /metrics before, during (every `interval_s`) and after the measured phase."""

    def __init__(self, client: httpx.AsyncClient, url: str, interval_s: float, secret: str | None):
        self.client, self.url, self.interval_s, self.secret = client, url, interval_s, secret
        self.before: dict[str, float] | None = None
        self.types: dict[str, str] = {}
        self.samples: list[dict[str, float]] = []
        self.reason = ""
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()

    async def _get(self) -> dict[str, float] | None:
        try:
            r = await self.client.get(self.url, timeout=5.0)
        except httpx.HTTPError as e:
            self.reason = _redact(f"GET {METRICS_PATH} failed: {type(e).__name__}: {e}", self.secret)
            return None
        if r.status_code != 200:
            hint = " (llama-server needs --metrics)" if r.status_code in (404, 501) else ""
            self.reason = f"GET {METRICS_PATH} answered HTTP {r.status_code}{hint}"
            return None
        values, types = parse_prometheus(r.text)
        self.types.update(types)
        return values

    async def start(self) -> None:
        self.before = await self._get()
        if self.before is not None:
            self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), self.interval_s)
                return
            except asyncio.TimeoutError:
                pass
            v = await self._get()
            if v is not None:
                self.samples.append({n: v[n] for n in _gauge_names(v, self.types)})

    async def finish(self) -> dict[str, Any]:
        if self._task is not None:
            self._stop.set()
            await self._task
        after = await self._get() if self.before is not None else None
        if self.before is None or after is None:
            return {"available": False, "reason": self.reason or "no /metrics"}
        self.samples.append({n: after[n] for n in _gauge_names(after, self.types)})
        return metrics_delta(self.before, after, self.types, self.samples)


# -- the benchmark ------------------------------------------------------------------------------

def _prompt_source(workload: Workload, salt: str, tokenizer: Tokenizer | str | Path | None,
                   notes: list[str]) -> tuple[PromptSource, str]:
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
    desc = (f"synthetic, exactly {workload.prompt_tokens} tokens of prompt text ({tok.name}; "
            f"chat template not counted)" if words else
            f"synthetic, about {workload.prompt_tokens} tokens (approximation: ~1 token per "
            f"common English word, nonce ~10 tokens)")
    if workload.shared_prefix_fraction > 0:
        desc += (f", after a {workload.shared_prefix_tokens}-token system prompt shared by "
                 f"{workload.shared_prefix_fraction:.0%} of requests (unique for the others)")
    return PromptSource(workload, salt, words=words), desc


async def run_benchmark(
    base_url: str,
    workload: Workload,
    model: str,
    *,
    extra_body: dict | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    on_phase: Callable[[str], None] | None = None,
    api_key: str | None = None,
    tokenizer: Tokenizer | str | Path | None = None,
    goodput_fn: Callable[[RequestSample], bool] | None = None,
    scrape_metrics: bool = False,
    metrics_interval_s: float = METRICS_INTERVAL_S,
) -> BenchRun:
    """Warm up, then measure the workload (closed or open loop).

    Phases are reported as ``on_phase("warmup")`` (only when warm-up requests > 0) then
    ``on_phase("measuring")``. Warm-up is always a closed loop of `workload.concurrency` users
    and is left out of the metrics. `extra_body` is merged over the request JSON (llama-server:
    ``{"cache_prompt": False}``). Per-request failures (HTTP status, connection errors, error
    objects in the stream, empty streams, `request_timeout_s`) become ``ok=False`` samples and are
    never raised. In the closed loop `queue_wait_s` is the time from the start of the phase (when
    every request is due) until a free worker sent it; in the open loop it is the send lag behind
    the schedule (also ``schedule_lag_s``). `duration_s` runs from the first send to the last
    completion of the measured phase. Output tokens come from ``usage`` and fall back to counting
    content chunks only when the server sent no usage. Each run salts the prompt nonces afresh,
    so repeated runs against one server do not hit its prefix cache either.

    `api_key` is sent as ``Authorization: Bearer`` and kept nowhere else. `tokenizer` (a
    Tokenizer, or a GGUF file / HF folder path) makes synthetic prompts exact; without it they
    are approximate and `BenchRun.prompt_tokens_exact` is False. `goodput_fn` adds
    ``request_goodput``; `scrape_metrics` fills `BenchRun.server_metrics` from ``/metrics``.
    Bad input (dataset file, tokenizer path) raises `SpecError` before any request is sent.
    """
    workload.validate()
    path = COMPLETIONS_PATH if workload.endpoint == "completions" else CHAT_PATH
    base = base_url.rstrip("/")
    url = base + path
    salt = os.urandom(4).hex()
    notes: list[str] = []
    source, source_desc = _prompt_source(workload, salt, tokenizer, notes)

    def body(i: int) -> dict:
        return build_body(model, source.prompt(i), workload, extra_body)

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(connect=10, read=None, write=30, pool=None)
    w0 = workload.warmup_requests
    fell_behind = False
    server_metrics = None
    async with httpx.AsyncClient(limits=limits, timeout=timeout, transport=transport,
                                 headers=headers) as client:
        warmup: list[RequestSample] = []
        if w0 > 0:
            if on_phase:
                on_phase("warmup")
            warmup, _ = await _closed_loop(client, url, body, w0, workload.concurrency,
                                           workload.request_timeout_s, secret=api_key)
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
        scraper = _Scraper(client, base + METRICS_PATH, metrics_interval_s, api_key) \
            if scrape_metrics else None
        if scraper is not None:
            await scraper.start()
        if on_phase:
            on_phase("measuring")
        if workload.mode == "open":
            samples, duration_s = await _open_loop(client, url, bodies, offsets,
                                                   workload.request_timeout_s, api_key)
        elif workload.duration_s is not None:
            samples, duration_s = await _closed_loop(
                client, url, lambda i: body(w0 + i), None, workload.concurrency,
                workload.request_timeout_s, workload.duration_s, api_key)
        else:
            prebuilt = [body(w0 + i) for i in range(workload.num_requests)]
            samples, duration_s = await _closed_loop(
                client, url, prebuilt.__getitem__, workload.num_requests, workload.concurrency,
                workload.request_timeout_s, secret=api_key)
        if scraper is not None:
            server_metrics = await scraper.finish()
    metrics = summarize(samples, duration_s, goodput_fn)
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
                    workload=workload.to_dict(), endpoint=path, notes=notes)


def run(
    base_url: str,
    workload: Workload,
    model: str,
    *,
    extra_body: dict | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    on_phase: Callable[[str], None] | None = None,
    api_key: str | None = None,
    tokenizer: Tokenizer | str | Path | None = None,
    goodput_fn: Callable[[RequestSample], bool] | None = None,
    scrape_metrics: bool = False,
) -> BenchRun:
    """Synchronous `run_benchmark` (``asyncio.run``; not callable from inside a running loop)."""
    return asyncio.run(run_benchmark(base_url, workload, model, extra_body=extra_body,
                                     transport=transport, on_phase=on_phase, api_key=api_key,
                                     tokenizer=tokenizer, goodput_fn=goodput_fn,
                                     scrape_metrics=scrape_metrics))


def detect_model(base_url: str, *, api_key: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> str:
    """The first model id the server lists at /v1/models (for `kvtune bench` without --model)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    url = base_url.rstrip("/") + "/v1/models"
    try:
        with httpx.Client(timeout=10.0, headers=headers, transport=transport) as c:
            r = c.get(url)
    except httpx.HTTPError as e:
        raise SpecError(_redact(f"cannot reach {url}: {type(e).__name__}: {e}", api_key)) from e
    if r.status_code != 200:
        hint = " (check --api-key / OPENAI_API_KEY)" if r.status_code in (401, 403) else ""
        raise SpecError(f"{url} answered HTTP {r.status_code}{hint}; pass --model")
    try:
        data = r.json().get("data") or []
        return str(data[0]["id"])
    except (ValueError, AttributeError, LookupError, TypeError):
        raise SpecError(f"{url} lists no model; pass --model") from None
