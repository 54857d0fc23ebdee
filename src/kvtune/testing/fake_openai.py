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
import hashlib
import json
import math
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


# The fake model's words: its greedy answers and their top-k log-probabilities (`fake_answer`).
FAKE_VOCAB = tuple(
    "the sky is blue because light scatters in air and short waves bend more than red ones so we see it".split()
)


def _unit(*parts: str) -> float:
    """A number in [0, 1) drawn from `parts` alone (the same on every run and process)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def fake_answer(prompt: str, max_tokens: int, top_k: int, drift: float = 0.0) -> list[dict[str, Any]]:
    """The fake model's greedy answer as OpenAI's ``logprobs.content``: each next word has a
    logit drawn from the prompt and the words so far; `drift` adds a second draw of that scale
    to every logit (the numerics of a quantised cache): 0 answers exactly like the defaults, a
    small drift moves the probabilities and flips a near tie now and then, a large one changes
    the answer from its first words."""
    words: list[str] = []
    content = []
    for _ in range(max_tokens):
        ctx = prompt + "|" + " ".join(words)
        logits = [4.0 * _unit(ctx, w) + drift * (_unit("drift", ctx, w) - 0.5) for w in FAKE_VOCAB]
        top = max(logits)
        norm = top + math.log(sum(math.exp(x - top) for x in logits))
        ranked = sorted(zip(FAKE_VOCAB, (x - norm for x in logits)), key=lambda p: -p[1])
        word, lp = ranked[0]
        content.append(
            {
                "token": " " + word,
                "logprob": lp,
                "top_logprobs": [{"token": " " + w, "logprob": v} for w, v in ranked[:top_k]],
            }
        )
        words.append(word)
    return content


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
        answer_drift: float = 0.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.answer_drift = answer_drift
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
        choice: dict[str, Any] = {"index": 0, "message": msg, "finish_reason": "length"}
        if body.get("logprobs"):  # the fake model's own greedy answer (`fake_answer`)
            top_k = int(body.get("top_logprobs") or 1)
            content = fake_answer(_prompt_text(body), max_tokens, top_k, self.answer_drift)
            choice["logprobs"] = {"content": content}
            msg["content"] = "".join(c["token"] for c in content)
        return JsonReply(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": self.model,
                "choices": [choice],
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
