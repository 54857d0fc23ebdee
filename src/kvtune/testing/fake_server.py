"""A fake OpenAI-compatible streaming server with set delays, on the standard library only.

The load client and the tuning loop are tested against known timings instead of a real model:
this server waits `ttft_s` before the first content chunk and `itl_s` between chunks, and can
fail, hang, start slowly or crash on demand. It runs in a background thread (context manager,
port 0) for client tests, or as a real process (``python -m kvtune.testing.fake_server``) for
launcher/loop tests; it imports only the stdlib so that process starts in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAIServer:
    """Serves /health, /v1/models and streaming /v1/chat/completions on `host`:`port`.

    Streaming reply: an optional role-only chunk at once, the first content chunk after
    `ttft_s`, then one chunk of `tokens_per_chunk` tokens every `itl_s` until the request's
    `max_tokens`, then a final chunk with `usage` and llama-server-style `timings`, then
    ``data: [DONE]``. `fail_status` answers every chat request with that HTTP status;
    `hang_after_tokens` stops streaming (without closing) after that many tokens; /health and chat
    answer 503 until `startup_delay_s` has passed since start. With `crash_after_requests=N` the
    first N chat requests are served and request N+1 crashes the server: the process exits with
    status 1 when `exit_on_crash` (the CLI sets it), otherwise the connection is dropped without a
    reply, as is every later request. Chat request bodies are recorded in `received`, their
    ``Authorization`` headers (None when absent) in `authorizations`. `truncate_at=K` ends every
    answer after K tokens with finish reason `truncate_finish` ("length": a context that filled up,
    as llama-server does; "stop": a server that ignores ``ignore_eos``), whatever `max_tokens`
    asked; `omit_usage` leaves out the final chunk's ``usage`` and ``timings`` (a server that
    reports no token counts).
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
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "fake-model",
        exit_on_crash: bool = False,
        ttft_per_active_s: float = 0.0,
        llama_props: bool = True,
        truncate_at: int | None = None,
        truncate_finish: str = "length",
        omit_usage: bool = False,
    ) -> None:
        self.truncate_at = truncate_at
        self.truncate_finish = truncate_finish
        self.omit_usage = omit_usage
        # Answer /props like llama-server (the bench then applies llama-server's cache policy).
        self.llama_props = llama_props
        # Load-dependent TTFT: each other stream in flight adds this much, like a real server's
        # queueing, so capacity searches have a known answer.
        self.ttft_per_active_s = ttft_per_active_s
        self.active = 0
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.fail_status = fail_status
        self.hang_after_tokens = hang_after_tokens
        self.role_chunk_first = role_chunk_first
        self.tokens_per_chunk = max(1, tokens_per_chunk)
        self.startup_delay_s = startup_delay_s
        self.crash_after_requests = crash_after_requests
        self.host = host
        self.model = model
        self.exit_on_crash = exit_on_crash
        self.received: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.chat_requests = 0
        self.crashed = False
        self._port = port
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._started_at = 0.0

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def loading(self) -> bool:
        return time.monotonic() - self._started_at < self.startup_delay_s

    def bind(self) -> None:
        """Open the listening socket; the startup-delay clock starts here."""
        if self._httpd is None:
            self._httpd = _HTTPServer((self.host, self._port), _Handler)
            self._httpd.fake = self
            self._started_at = time.monotonic()

    def serve_forever(self) -> None:
        """Serve in the calling thread until `stop()` (from another thread) or the process ends."""
        self.bind()
        assert self._httpd is not None
        self._httpd.serve_forever(poll_interval=0.05)

    def start(self) -> "FakeOpenAIServer":
        self.bind()
        self._thread = threading.Thread(target=self.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes streams that are sleeping or hanging
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the stdlib's 5 drops connects when a benchmark opens many at once
    fake: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # clients hanging up are normal
            super().handle_error(request, client_address)


def _prompt_words(body: dict[str, Any]) -> int:
    n = 0
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            n += len(content.split())
    if isinstance(body.get("prompt"), str):
        n += len(body["prompt"].split())
    return n


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    # -- plumbing --------------------------------------------------------------------------
    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        """Close the connection abruptly, with no reply (a crashed server)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _event(self, obj: Any) -> None:
        self._write_chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _loading_reply(self) -> None:
        err = {"code": 503, "message": "Loading model", "type": "unavailable_error"}
        self._json(503, {"error": err})

    # -- endpoints -------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        if fake.crashed:
            self._drop()
        elif path == "/health":
            if fake.loading:
                self._loading_reply()
            else:
                self._json(200, {"status": "ok"})
        elif path == "/props" and fake.llama_props:
            # what llama-server's /props carries that `bench.server_kind` reads
            self._json(200, {"total_slots": 4, "build_info": "fake", "default_generation_settings": {}})
        elif path == "/v1/models":
            model = {"id": fake.model, "object": "model", "owned_by": "kvtune-fake"}
            self._json(200, {"object": "list", "data": [model]})
        else:
            self._json(404, {"error": {"code": 404, "message": f"no route {path}"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if fake.crashed:
            self._drop()
            return
        if self.path.split("?", 1)[0] != "/v1/chat/completions":
            self._json(404, {"error": {"code": 404, "message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"code": 400, "message": "invalid JSON body"}})
            return
        with fake._lock:
            fake.received.append(body)
            fake.authorizations.append(self.headers.get("Authorization"))
            fake.chat_requests += 1
            n = fake.chat_requests
        if fake.crash_after_requests is not None and n > fake.crash_after_requests:
            if fake.exit_on_crash:
                os._exit(1)
            fake.crashed = True
            self._drop()
        elif fake.loading:
            self._loading_reply()
        elif fake.fail_status is not None:
            err = {"code": fake.fail_status, "message": "fake failure", "type": "server_error"}
            self._json(fake.fail_status, {"error": err})
        else:
            try:
                if body.get("stream"):
                    self._stream(fake, body)
                else:
                    self._complete(fake, body)
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True

    def _complete(self, fake: FakeOpenAIServer, body: dict[str, Any]) -> None:
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if fake._stop.wait(fake.ttft_s + fake.itl_s * (max_tokens - 1)):
            return
        prompt_n = _prompt_words(body)
        msg = {"role": "assistant", "content": " tok" * max_tokens}
        self._json(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "model": fake.model,
            "choices": [{"index": 0, "message": msg, "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt_n, "completion_tokens": max_tokens,
                      "total_tokens": prompt_n + max_tokens},
        })

    def _stream(self, fake: FakeOpenAIServer, body: dict[str, Any]) -> None:
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if fake.truncate_at is not None:
            max_tokens = min(max_tokens, fake.truncate_at)
        prompt_n = _prompt_words(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": fake.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        if fake.role_chunk_first:
            self._event(chunk({"role": "assistant", "content": ""}))
        with fake._lock:
            fake.active += 1
            ttft = fake.ttft_s + fake.ttft_per_active_s * (fake.active - 1)
        try:
            self._stream_tokens(fake, body, chunk, max_tokens, prompt_n, ttft)
        finally:
            with fake._lock:
                fake.active -= 1

    def _stream_tokens(self, fake: FakeOpenAIServer, body: dict[str, Any], chunk: Any,
                       max_tokens: int, prompt_n: int, ttft: float) -> None:
        sent = 0
        t_first = time.perf_counter()
        while sent < max_tokens:
            if fake.hang_after_tokens is not None and sent >= fake.hang_after_tokens:
                fake._stop.wait()  # hang until the server stops; never finish the body
                self.close_connection = True
                return
            if fake._stop.wait(ttft if sent == 0 else fake.itl_s):
                self.close_connection = True
                return
            if sent == 0:
                t_first = time.perf_counter()
            k = min(fake.tokens_per_chunk, max_tokens - sent)
            self._event(chunk({"content": " tok" * k}))
            sent += k
        final = chunk({}, fake.truncate_finish if fake.truncate_at is not None else "length")
        if not fake.omit_usage:
            final["usage"] = {"prompt_tokens": prompt_n, "completion_tokens": sent,
                              "total_tokens": prompt_n + sent}
            final["timings"] = {"prompt_n": prompt_n, "prompt_ms": fake.ttft_s * 1000.0,
                                "predicted_n": sent,
                                "predicted_ms": (time.perf_counter() - t_first) * 1000.0}
        self._event(final)
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # end of the chunked body


def _count_start(path: str) -> int:
    """Add this start to the count kept in `path`; return which start this is (1, 2, ...)."""
    try:
        with open(path) as f:
            n = int(f.read().strip() or 0) + 1
    except (OSError, ValueError):
        n = 1
    with open(path, "w") as f:
        f.write(str(n))
    return n


def main(argv: list[str] | None = None) -> int:
    """Run the fake server in the foreground, like a real server process."""
    p = argparse.ArgumentParser(prog="python -m kvtune.testing.fake_server",
                                description="Fake OpenAI-compatible streaming server.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--model", default="fake-model")
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--ttft-per-active-ms", type=float, default=0.0)
    p.add_argument("--fail-status", type=int)
    p.add_argument("--hang-after-tokens", type=int)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--no-role-chunk", action="store_true")
    p.add_argument("--startup-delay-s", type=float, default=0.0)
    p.add_argument("--crash-after-requests", type=int)
    p.add_argument("--truncate-at", type=int, help="end every answer after this many tokens")
    p.add_argument("--truncate-finish", choices=("length", "stop"), default="length")
    p.add_argument("--omit-usage", action="store_true", help="send no usage or timings")
    p.add_argument("--bad-flag-exit", action="store_true",
                   help="act like a server rejecting one of its flags: exit 2 at once")
    p.add_argument("--port-clash", type=int, default=0,
                   help="nonzero: act as if another process had taken the port (exit 1, bind error)")
    p.add_argument("--start-count-file", help="count this server's starts in this file")
    p.add_argument("--faulty-starts", type=int,
                   help="with --start-count-file: the start-up faults (--port-clash, "
                        "--startup-delay-s) apply to the first N starts only")
    args = p.parse_args(argv)
    if args.bad_flag_exit:
        p.error("invalid argument: --bad-flag-exit (simulated flag rejection)")
    if args.start_count_file and args.faulty_starts is not None \
            and _count_start(args.start_count_file) > args.faulty_starts:
        args.port_clash, args.startup_delay_s = 0, 0.0  # a later start: healthy
    if args.port_clash:
        print(f"error: cannot listen on {args.host}:{args.port}: [Errno 98] Address already in use",
              file=sys.stderr)
        return 1
    server = FakeOpenAIServer(
        ttft_s=args.ttft_ms / 1000.0, itl_s=args.itl_ms / 1000.0, fail_status=args.fail_status,
        hang_after_tokens=args.hang_after_tokens, role_chunk_first=not args.no_role_chunk,
        tokens_per_chunk=args.tokens_per_chunk, startup_delay_s=args.startup_delay_s,
        crash_after_requests=args.crash_after_requests, host=args.host, port=args.port,
        model=args.model, exit_on_crash=True, ttft_per_active_s=args.ttft_per_active_ms / 1000.0,
        truncate_at=args.truncate_at, truncate_finish=args.truncate_finish,
        omit_usage=args.omit_usage,
    )
    try:
        server.bind()
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    print(f"fake server listening on {server.base_url}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
