"""The async streaming load client: the only code that sends benchmark traffic at a server.

It drives a closed loop of `workload.concurrency` workers over the OpenAI-compatible streaming
chat API, after a warm-up of the same shape, and times each request on the client's monotonic
clock with the definitions of ../shared/MEASUREMENT.md (TTFT to the first *content* chunk,
output tokens from ``usage``, failures recorded rather than raised). A hung server counts as a
failed request once `workload.request_timeout_s` has passed; it never hangs the benchmark.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import httpx

from kvtune.bench.prompts import synthetic_prompt
from kvtune.bench.workload import Workload
from kvtune.objectives.metrics import RequestSample, summarize

CHAT_PATH = "/v1/chat/completions"


@dataclass
class BenchRun:
    """One measured run. `metrics` = ``summarize(samples, duration_s)``; warm-up is kept apart."""

    samples: list[RequestSample]
    warmup_samples: list[RequestSample]
    duration_s: float
    metrics: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain data; note `metrics` may hold inf (failed requests) and nan (no data)."""
        return {
            "duration_s": self.duration_s,
            "metrics": dict(self.metrics),
            "samples": [s.to_dict() for s in self.samples],
            "warmup_samples": [s.to_dict() for s in self.warmup_samples],
        }


def build_body(model: str, prompt: str, workload: Workload, extra_body: dict | None) -> dict:
    """The chat request: fixed output length (`ignore_eos`), usage in the stream, greedy."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": workload.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0,
    }
    body.update(extra_body or {})
    return body


def _has_content(obj: dict[str, Any]) -> bool:
    for choice in obj.get("choices") or []:
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


async def _one_request(
    client: httpx.AsyncClient, url: str, body: dict, timeout_s: float, due: float
) -> RequestSample:
    s = RequestSample(send_time=time.perf_counter())
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
    return s


async def _closed_loop(
    client: httpx.AsyncClient, url: str, bodies: list[dict], concurrency: int, timeout_s: float
) -> tuple[list[RequestSample], float]:
    """`concurrency` workers take requests in order; returns samples and first-send..last-end."""
    samples: list[RequestSample | None] = [None] * len(bodies)
    ends: list[float] = []
    next_index = 0
    start = time.perf_counter()

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(bodies):
            i = next_index
            next_index += 1
            samples[i] = await _one_request(client, url, bodies[i], timeout_s, start)
            ends.append(time.perf_counter())

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(bodies)))))
    done = [s for s in samples if s is not None]
    if not done:
        return [], 0.0
    return done, max(ends) - min(s.send_time for s in done)


async def run_benchmark(
    base_url: str,
    workload: Workload,
    model: str,
    *,
    extra_body: dict | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> BenchRun:
    """Warm up, then measure `workload.num_requests` requests in a closed loop.

    Phases are reported as ``on_phase("warmup")`` (only when warm-up requests > 0) then
    ``on_phase("measuring")``. `extra_body` is merged over the request JSON (llama-server:
    ``{"cache_prompt": False}``). Per-request failures (HTTP status, connection errors, error
    objects in the stream, empty streams, `request_timeout_s`) become ``ok=False`` samples and are
    never raised. `queue_wait_s` is, in this closed loop, the time from the start of the phase
    (when every request is due) until a free worker sent it. `duration_s` runs from the first send
    to the last completion of the measured phase. Output tokens come from ``usage`` and fall back
    to counting content chunks only when the server sent no usage. Each run salts the prompt
    nonces afresh, so repeated runs against one server do not hit its prefix cache either.
    """
    workload.validate()
    url = base_url.rstrip("/") + CHAT_PATH
    salt = os.urandom(4).hex()

    def bodies(first: int, count: int) -> list[dict]:
        return [
            build_body(model, synthetic_prompt(i, workload.prompt_tokens, workload.seed,
                                               salt=salt), workload, extra_body)
            for i in range(first, first + count)
        ]

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(connect=10, read=None, write=30, pool=None)
    async with httpx.AsyncClient(limits=limits, timeout=timeout, transport=transport) as client:
        warmup: list[RequestSample] = []
        if workload.warmup_requests > 0:
            if on_phase:
                on_phase("warmup")
            warmup, _ = await _closed_loop(client, url, bodies(0, workload.warmup_requests),
                                           workload.concurrency, workload.request_timeout_s)
        if on_phase:
            on_phase("measuring")
        samples, duration_s = await _closed_loop(
            client, url, bodies(workload.warmup_requests, workload.num_requests),
            workload.concurrency, workload.request_timeout_s,
        )
    return BenchRun(samples, warmup, duration_s, summarize(samples, duration_s))


def run(
    base_url: str,
    workload: Workload,
    model: str,
    *,
    extra_body: dict | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> BenchRun:
    """Synchronous `run_benchmark` (``asyncio.run``; not callable from inside a running loop)."""
    return asyncio.run(run_benchmark(base_url, workload, model, extra_body=extra_body,
                                     transport=transport, on_phase=on_phase))
