"""What the fake OpenAI-compatible server answers, apart from how the answer is carried.

`FakeOpenAI` holds the fake's settings (delays, faults), its state (requests seen, streams in
flight, crashed) and the answer to each request as data: a `JsonReply`, `DROP` (the connection
closes with no reply) or a `StreamReply` whose steps are waits (seconds, as floats), SSE events
(bytes) and `HANG`. Two carriers play those steps: fake_server.py over real HTTP in a thread or
process (waits are real), and mock_openai.py as an ``httpx.MockTransport`` on an injected clock
(waits are virtual in tests). Standard library only, so the fake server process starts in
milliseconds.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Final, Generator

CHAT_PATH = "/v1/chat/completions"


class _Hang(enum.Enum):
    """A one-member enum, so that `step is HANG` narrows a step's type (mypy)."""

    HANG = "HANG"

    def __repr__(self) -> str:
        return "HANG"


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


HANG: Final = _Hang.HANG  # a stream step: send nothing more and never end the body
DROP = _Drop()  # a reply: close the connection without answering (a crashed server)


@dataclass(frozen=True)
class JsonReply:
    """A JSON answer with this status, sent after `delay_s`."""

    status: int
    body: Any
    delay_s: float = 0.0


@dataclass
class StreamReply:
    """A 200 ``text/event-stream`` answer: play `steps` in order (float: wait that many seconds;
    bytes: write one SSE event; HANG: stop without ending the body)."""

    steps: Generator[float | bytes | _Hang, None, Any]  # a generator: the carrier closes it


Reply = JsonReply | StreamReply | _Drop


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


DONE_EVENT = b"data: [DONE]\n\n"


def prompt_words(body: dict[str, Any]) -> int:
    """The fake's prompt token count: words of the messages (chat) or of the prompt."""
    n = 0
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            n += len(content.split())
    if isinstance(body.get("prompt"), str):
        n += len(body["prompt"].split())
    return n


def _prompt_text(body: dict[str, Any]) -> str:
    """The prompt as one text: the messages' contents in order (chat), or the prompt."""
    parts = [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict)]
    parts.append(body.get("prompt"))
    return " ".join(p for p in parts if isinstance(p, str))


def _max_tokens(body: dict[str, Any]) -> int:
    return int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)


class FakeOpenAI:
    """Serves /health, /props, /v1/models and /v1/chat/completions (streaming or not).

    Streaming reply: an optional role-only chunk at once, the first content chunk after
    `ttft_s` (plus `ttft_per_active_s` for each other stream in flight, like a real server's
    queueing, so capacity searches have a known answer), then one chunk of `tokens_per_chunk`
    tokens every `itl_s` until the request's `max_tokens`, then a final chunk with `usage` and
    llama-server-style `timings`, then ``data: [DONE]``. `fail_status` answers every chat
    request with that HTTP status; `hang_after_tokens` stops streaming (without closing) after
    that many tokens; /health and chat answer 503 until `startup_delay_s` has passed since
    `mark_started`. With `crash_after_requests=N` the first N chat requests are served, request
    N+1 crashes the server (`crashed`) and it and every later request are dropped. Chat request
    bodies are recorded in `received`, their ``Authorization`` headers (None when absent) in
    `authorizations`. `truncate_at=K` ends every answer after K tokens with finish reason
    `truncate_finish` ("length": a context that filled up, as llama-server does; "stop": a server
    that ignores ``ignore_eos``); `omit_usage` leaves out the final chunk's ``usage`` and
    ``timings``. `llama_props` answers /props like llama-server. `now` is the clock every delay
    and the start-up delay are measured on. `prefill_s_per_token` adds that much TTFT for every
    prompt word the fake must process; with `prefix_cache` the words a request shares, from the
    start, with an earlier prompt and its answer are cached (unless it sends ``cache_prompt: false``, as
    llama-server): they cost nothing and the timings' ``cache_n`` counts them.
    """

    def __init__(
        self,
        ttft_s: float = 0.05,
        itl_s: float = 0.01,
        fail_status: int | None = None,
        hang_after_tokens: int | None = None,
        role_chunk_first: bool = True,
        tokens_per_chunk: int = 1,
        startup_delay_s: float = 0.0,
        crash_after_requests: int | None = None,
        *,
        model: str = "fake-model",
        ttft_per_active_s: float = 0.0,
        llama_props: bool = True,
        truncate_at: int | None = None,
        truncate_finish: str = "length",
        omit_usage: bool = False,
        prefill_s_per_token: float = 0.0,
        prefix_cache: bool = False,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefill_s_per_token, self.prefix_cache = prefill_s_per_token, prefix_cache
        self._cached: list[list[str]] = []
        self.ttft_s, self.itl_s = ttft_s, itl_s
        self.fail_status, self.hang_after_tokens = fail_status, hang_after_tokens
        self.role_chunk_first = role_chunk_first
        self.tokens_per_chunk = max(1, tokens_per_chunk)
        self.startup_delay_s = startup_delay_s
        self.crash_after_requests = crash_after_requests
        self.model, self.ttft_per_active_s, self.llama_props = model, ttft_per_active_s, llama_props
        self.truncate_at, self.truncate_finish, self.omit_usage = truncate_at, truncate_finish, omit_usage
        self.now = now
        self.received: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.chat_requests = 0
        self.active = 0
        self.crashed = False
        self._lock = threading.Lock()
        self._started_at = now()

    def mark_started(self) -> None:
        """The start-up delay counts from here (the listening socket opened)."""
        self._started_at = self.now()

    @property
    def loading(self) -> bool:
        return self.now() - self._started_at < self.startup_delay_s

    def _loading_reply(self) -> JsonReply:
        return JsonReply(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})

    # -- requests ------------------------------------------------------------------------------
    def get(self, path: str) -> Reply:
        path = path.split("?", 1)[0]
        if self.crashed:
            return DROP
        if path == "/health":
            return self._loading_reply() if self.loading else JsonReply(200, {"status": "ok"})
        if path == "/props" and self.llama_props:
            # what llama-server's /props carries that `bench.server_kind` reads
            return JsonReply(200, {"total_slots": 4, "build_info": "fake", "default_generation_settings": {}})
        if path == "/v1/models":
            model = {"id": self.model, "object": "model", "owned_by": "kvtune-fake"}
            return JsonReply(200, {"object": "list", "data": [model]})
        return JsonReply(404, {"error": {"code": 404, "message": f"no route {path}"}})

    def post(self, path: str, raw: bytes, authorization: str | None) -> Reply:
        """The reply to a POST; a chat request is recorded (and may crash the server)."""
        if self.crashed:
            return DROP
        if path.split("?", 1)[0] != CHAT_PATH:
            return JsonReply(404, {"error": {"code": 404, "message": f"no route {path}"}})
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return JsonReply(400, {"error": {"code": 400, "message": "invalid JSON body"}})
        with self._lock:
            self.received.append(body)
            self.authorizations.append(authorization)
            self.chat_requests += 1
            n = self.chat_requests
        if self.crash_after_requests is not None and n > self.crash_after_requests:
            self.crashed = True
            return DROP
        if self.loading:
            return self._loading_reply()
        if self.fail_status is not None:
            err = {"code": self.fail_status, "message": "fake failure", "type": "server_error"}
            return JsonReply(self.fail_status, {"error": err})
        if body.get("stream"):
            return StreamReply(self._stream_steps(body))
        return self._complete(body)

    def _complete(self, body: dict[str, Any]) -> JsonReply:
        max_tokens = _max_tokens(body)
        prompt_n = prompt_words(body)
        msg = {"role": "assistant", "content": " tok" * max_tokens}
        return JsonReply(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": self.model,
                "choices": [{"index": 0, "message": msg, "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": prompt_n,
                    "completion_tokens": max_tokens,
                    "total_tokens": prompt_n + max_tokens,
                },
            },
            delay_s=self.ttft_s + self.itl_s * (max_tokens - 1),
        )

    # -- the stream ----------------------------------------------------------------------------
    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _stream_steps(self, body: dict[str, Any]) -> Generator[float | bytes | _Hang, None, None]:
        """The stream as steps; it counts as in flight from its role chunk to its last token (or
        until the carrier closes this generator: a client that hung up)."""
        if self.role_chunk_first:
            yield _sse(self._chunk({"role": "assistant", "content": ""}))
        with self._lock:
            self.active += 1
            cached = self._cache_hit(body)
            ttft = self.ttft_s + self.ttft_per_active_s * (self.active - 1)
            ttft += self.prefill_s_per_token * (prompt_words(body) - cached)
        try:
            tail = yield from self._token_steps(body, ttft, cached)
        finally:
            with self._lock:
                self.active -= 1
        yield from tail  # the last token is out: the stream no longer delays the others

    def _cache_hit(self, body: dict[str, Any]) -> int:
        """Prompt words served from the fake's prefix cache (the longest common start with an
        earlier prompt and its answer); both are cached for later ones. Called under the lock."""
        if not self.prefix_cache or body.get("cache_prompt") is False:
            return 0
        words = _prompt_text(body).split()
        best = 0
        for old in self._cached:
            n = 0
            for a, b in zip(old, words):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self._cached.append(words + ["tok"] * _max_tokens(body))  # a slot keeps its answer too
        return best

    def _token_steps(
        self, body: dict[str, Any], ttft: float, cached: int = 0
    ) -> Generator[float | bytes | _Hang, None, list[bytes]]:
        """Waits and token chunks; returns the final usage event and ``[DONE]``."""
        max_tokens = _max_tokens(body)
        if self.truncate_at is not None:
            max_tokens = min(max_tokens, self.truncate_at)
        sent, t_first = 0, self.now()
        while sent < max_tokens:
            if self.hang_after_tokens is not None and sent >= self.hang_after_tokens:
                yield HANG
                return []
            yield ttft if sent == 0 else self.itl_s
            if sent == 0:
                t_first = self.now()
            k = min(self.tokens_per_chunk, max_tokens - sent)
            yield _sse(self._chunk({"content": " tok" * k}))
            sent += k
        final = self._chunk({}, self.truncate_finish if self.truncate_at is not None else "length")
        if not self.omit_usage:
            prompt_n = prompt_words(body)
            final["usage"] = {"prompt_tokens": prompt_n, "completion_tokens": sent, "total_tokens": prompt_n + sent}
            final["timings"] = {
                "prompt_n": prompt_n - cached,
                "cache_n": cached,
                "prompt_ms": self.ttft_s * 1000.0,
                "predicted_n": sent,
                "predicted_ms": (self.now() - t_first) * 1000.0,
            }
        return [_sse(final), DONE_EVENT]
