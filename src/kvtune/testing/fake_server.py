"""A fake OpenAI-compatible streaming server with set delays, over real HTTP, on the stdlib only.

The load client and the tuning loop are tested against known timings instead of a real model:
this server waits `ttft_s` before the first content chunk and `itl_s` between chunks, and can
fail, hang, start slowly or crash on demand (what it answers is fake_openai.py; this module
carries it over HTTP). It runs in a background thread (context manager, port 0), or as a real
process (``python -m kvtune.testing.fake_server``) for launcher/loop tests; it imports only the
stdlib so that process starts in milliseconds. Tests of timings use mock_openai.py instead: the
same answers on virtual time, which the machine's load cannot move.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kvtune.testing.fake_openai import HANG, FakeOpenAI, JsonReply, Reply, StreamReply

MODULE = "kvtune.testing.fake_server"


class FakeOpenAIServer(FakeOpenAI):
    """`FakeOpenAI` (its settings, state and answers: see fake_openai.py) served over real HTTP on
    `host`:`port` (0: any free port), in a background thread (`start`, or as a context manager)
    or in the calling thread (`serve_forever`, the process mode). With `exit_on_crash` (the CLI
    sets it) the request that crashes the server ends the process with status 1; otherwise the
    connection is dropped without a reply, as is every later request. `stop()` wakes every stream
    that is waiting or hanging."""

    def __init__(
        self, *args: Any, host: str = "127.0.0.1", port: int = 0, exit_on_crash: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.host = host
        self.exit_on_crash = exit_on_crash
        self._port = port
        self._stop = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def bind(self) -> None:
        """Open the listening socket; the startup-delay clock starts here."""
        if self._httpd is None:
            self._httpd = _HTTPServer((self.host, self._port), _Handler)
            self._httpd.fake = self
            self.mark_started()

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


class _Handler(BaseHTTPRequestHandler):
    """Plays a `FakeOpenAI` reply over HTTP/1.1 (streams as chunked transfer encoding)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._reply(self.server.fake.get(self.path))

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        was_crashed = fake.crashed
        reply = fake.post(self.path, raw, self.headers.get("Authorization"))
        if fake.crashed and not was_crashed and fake.exit_on_crash:
            os._exit(1)
        try:
            self._reply(reply)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _reply(self, reply: Reply) -> None:
        if isinstance(reply, StreamReply):
            self._play(reply)
        elif isinstance(reply, JsonReply):
            if reply.delay_s and self.server.fake._stop.wait(reply.delay_s):
                return
            self._json(reply.status, reply.body)
        else:
            self._drop()

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

    def _play(self, reply: StreamReply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        stop = self.server.fake._stop
        with closing(reply.steps) as steps:  # a client that hung up ends the stream's in-flight count
            for step in steps:
                if step is HANG:
                    stop.wait()  # hang until the server stops; never finish the body
                    self.close_connection = True
                    return
                if isinstance(step, bytes):
                    self._write_chunk(step)
                elif stop.wait(step):
                    self.close_connection = True
                    return
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="Fake OpenAI-compatible streaming server.")
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
    p.add_argument(
        "--bad-flag-exit", action="store_true", help="act like a server rejecting one of its flags: exit 2 at once"
    )
    p.add_argument(
        "--port-clash",
        type=int,
        default=0,
        help="nonzero: act as if another process had taken the port (exit 1, bind error)",
    )
    p.add_argument("--start-count-file", help="count this server's starts in this file")
    p.add_argument(
        "--answer-drift", type=float, default=0.0, help="move the fake model's logits by this much (a lossy config)"
    )
    p.add_argument(
        "--faulty-starts",
        type=int,
        help="with --start-count-file: the start-up faults (--port-clash, "
        "--startup-delay-s) apply to the first N starts only",
    )
    return p


def fake_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The `FakeOpenAI` keyword arguments that the server's command line asks for."""
    return dict(
        ttft_s=args.ttft_ms / 1000.0,
        itl_s=args.itl_ms / 1000.0,
        fail_status=args.fail_status,
        hang_after_tokens=args.hang_after_tokens,
        role_chunk_first=not args.no_role_chunk,
        tokens_per_chunk=args.tokens_per_chunk,
        startup_delay_s=args.startup_delay_s,
        crash_after_requests=args.crash_after_requests,
        model=args.model,
        ttft_per_active_s=args.ttft_per_active_ms / 1000.0,
        truncate_at=args.truncate_at,
        truncate_finish=args.truncate_finish,
        omit_usage=args.omit_usage,
        answer_drift=args.answer_drift,
    )


def settings_from_argv(argv: list[str]) -> dict[str, Any]:
    """`fake_settings` of a fake server's command line (``python -m kvtune.testing.fake_server
    ...``, or its flags alone), without starting anything."""
    flags = argv[argv.index(MODULE) + 1 :] if MODULE in argv else argv
    return fake_settings(_parser().parse_args(flags))


def main(argv: list[str] | None = None) -> int:
    """Run the fake server in the foreground, like a real server process."""
    p = _parser()
    args = p.parse_args(argv)
    if args.bad_flag_exit:
        p.error("invalid argument: --bad-flag-exit (simulated flag rejection)")
    if (
        args.start_count_file
        and args.faulty_starts is not None
        and _count_start(args.start_count_file) > args.faulty_starts
    ):
        args.port_clash, args.startup_delay_s = 0, 0.0  # a later start: healthy
    if args.port_clash:
        print(f"error: cannot listen on {args.host}:{args.port}: [Errno 98] Address already in use", file=sys.stderr)
        return 1
    server = FakeOpenAIServer(host=args.host, port=args.port, exit_on_crash=True, **fake_settings(args))
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
