"""One streamed request: its JSON body, and the timing of its answer as it arrives.

The definitions are those of ../shared/MEASUREMENT.md: TTFT runs to the first *content* chunk
(a role-only chunk is not a token), E2EL to the last content chunk (not to the usage chunk or
``[DONE]``). Output tokens come from ``usage.completion_tokens``; without it they are counted from
the stream (llama-server's ``timings.predicted_n``, else one token per content chunk) and the sample
says so (`tokens_from_stream`), never a silent 0. With ``ignore_eos`` a stream that ends with
fewer tokens than ``max_tokens`` is a failed request, "truncated: 12 of 64 tokens" (a per-slot
context too small for prompt + chat template + output, or a server that ignores ``ignore_eos``):
a short answer must not pass for a fast one. A failure (HTTP status, connection error, an error object or event in the
stream, an empty stream, the request timeout) is recorded on the sample, never raised, and any
API key a server echoes back is scrubbed from its text.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from kvtune.bench.prompts import Prompt
from kvtune.clock import REAL_CLOCK, Clock
from kvtune.objectives.metrics import RequestSample
from kvtune.workload import Workload

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


def build_body(model: str, prompt: str | Prompt, workload: Workload, extra_body: dict | None) -> dict:
    """The request JSON: fixed output length (`ignore_eos`), usage in the stream, greedy.
    Chat sends a user message (after a system message in the shared-prefix workload);
    completions sends the text as ``prompt``."""
    if isinstance(prompt, str):
        prompt = Prompt(user=prompt)
    if workload.endpoint != "completions":
        messages = [] if prompt.system is None else [{"role": "system", "content": prompt.system}]
        return chat_body(model, messages + [{"role": "user", "content": prompt.user}], workload, extra_body)
    body: dict[str, Any] = {"model": model, "prompt": prompt.as_text()}
    return _generation(body, workload, extra_body)


def chat_body(model: str, messages: list[dict[str, str]], workload: Workload, extra_body: dict | None) -> dict:
    """A chat request of these messages (a conversation's history and its next user turn)."""
    return _generation({"model": model, "messages": messages}, workload, extra_body)


def _generation(body: dict[str, Any], workload: Workload, extra_body: dict | None) -> dict:
    body.update(
        {
            "max_tokens": workload.output_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
            "temperature": 0,
        }
    )
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


def _content(obj: dict[str, Any]) -> str:
    """The answer text a chunk carries (chat ``delta.content`` or completions ``text``)."""
    parts = []
    for choice in obj.get("choices") or []:
        if isinstance(choice, dict):
            delta = choice.get("delta") or {}
            text = delta.get("content") if isinstance(delta, dict) else None
            text = choice.get("text") if text is None else text
            parts.append(text if isinstance(text, str) else "")
    return "".join(parts)


async def _stream(
    client: httpx.AsyncClient, url: str, body: dict, s: RequestSample, clock: Clock, answer: list[str] | None
) -> None:
    """Send one request and fill `s` in place; sets `s.ok` only on a complete, valid stream.
    Each line is timed on `clock` as it arrives; the answer's text goes to `answer` when given
    (a conversation's next turn sends it back as history)."""
    last: float | None = None
    content_chunks = 0
    usage: dict[str, Any] | None = None
    finish: str | None = None
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            text = (await resp.aread()).decode("utf-8", "replace")
            s.error = f"HTTP {resp.status_code}: {text[:200]}"
            return
        async for line in resp.aiter_lines():
            now = clock.monotonic()
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
                if answer is not None:
                    answer.append(_content(obj))
            finish = _finish_reason(obj) or finish
            if obj.get("usage"):
                usage = obj["usage"]
            if obj.get("timings"):
                s.server_timings = obj["timings"]
    _settle(s, body, last, usage, content_chunks, finish)


def _settle(
    s: RequestSample,
    body: dict,
    last: float | None,
    usage: dict[str, Any] | None,
    content_chunks: int,
    finish: str | None,
) -> None:
    """The stream ended cleanly: E2EL, token counts, and the truncation verdict."""
    if last is None:
        s.error = "stream ended with no content"
        return
    s.e2el_s = last - s.send_time
    s.prompt_tokens = _int(usage, "prompt_tokens") or 0
    counted = _int(usage, "completion_tokens")
    if counted is None:
        s.tokens_from_stream = True
        counted = _int(s.server_timings, "predicted_n")
        counted = content_chunks if counted is None else counted
    s.output_tokens = counted
    wanted = expected_tokens(body)
    if wanted is not None and counted < wanted:
        s.truncated = True
        s.error = f"truncated: {counted} of {wanted} tokens (finish_reason {finish or 'none'})"
        return
    s.ok = True


def expected_tokens(body: dict) -> int | None:
    """The output length a request forces (``ignore_eos`` with ``max_tokens``), else None: only
    then is a shorter answer a truncation rather than the model's own stop."""
    if not body.get("ignore_eos"):
        return None
    n = body.get("max_tokens", body.get("max_completion_tokens"))
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _finish_reason(obj: dict[str, Any]) -> str | None:
    for choice in obj.get("choices") or []:
        if isinstance(choice, dict) and choice.get("finish_reason"):
            return str(choice["finish_reason"])
    return None


def _int(d: dict[str, Any] | None, key: str) -> int | None:
    """``d[key]`` as a count, or None when the server did not say (absent, null, not a number)."""
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        return None
    return int(v)


def redact_secret(text: str, secret: str | None) -> str:
    """`text` without `secret` (an API key), whole or in the parts servers echo."""
    if not secret:
        return text
    text = text.replace(secret, "***")
    if len(secret) > 12:  # servers that echo a partial key ("sk-abc...xyz")
        text = text.replace(secret[:8], "***").replace(secret[-6:], "***")
    return text


async def one_request(
    client: httpx.AsyncClient,
    url: str,
    body: dict,
    timeout_s: float,
    due: float,
    intended: float | None = None,
    secret: str | None = None,
    clock: Clock = REAL_CLOCK,
    answer: list[str] | None = None,
) -> RequestSample:
    """Send one request due at `due` (a `clock.monotonic()` reading) and time it on `clock`;
    never raises. The timeout runs on the event loop's clock (`clock.run` starts that loop).
    The answer's text chunks are appended to `answer` when given."""
    s = RequestSample(send_time=clock.monotonic(), intended_send_time=intended)
    s.queue_wait_s = s.send_time - due
    try:
        await asyncio.wait_for(_stream(client, url, body, s, clock, answer), timeout_s)
    except asyncio.TimeoutError:
        s.ok = False
        s.error = f"timeout: no complete response within {timeout_s:g} s"
    except httpx.HTTPError as e:
        s.ok = False
        s.error = f"{type(e).__name__}: {e}"[:300]
    except (OSError, ValueError) as e:
        s.ok = False
        s.error = f"{type(e).__name__}: {e}"[:300]
    s.end_time = clock.monotonic()
    if s.error:
        s.error = redact_secret(s.error, secret)
    return s
