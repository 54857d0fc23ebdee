"""The streaming load client against the fake OpenAI server and httpx.MockTransport.

Timings are checked on virtual time (MockOpenAI, VirtualClock): the fake's delays are exactly
what the client measures, so the tests check the definitions (TTFT to the first content chunk,
TPOT from usage tokens) to the microsecond, whatever the machine's load. A few tests keep the
real HTTP fake server, for what only sockets show (chunked streams, refused connections, a
crashing process); those assert no timing.

Here the tests that start processes; the rest are in tests/unit/bench/test_client.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from kvtune.bench.client import BenchOptions, run
from kvtune.testing.fake_server import FakeOpenAIServer
from kvtune.testing.virtual_time import VirtualClock
from kvtune.workload import Workload

EXACT = 1e-9  # virtual time: only float rounding separates a measured delay from the fake's


def _wl(**kw: object) -> Workload:
    base = dict(
        concurrency=2, prompt_tokens=30, output_tokens=16, num_requests=2, warmup_requests=0, request_timeout_s=10.0
    )
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- request body and stream parsing via MockTransport ----------------------------------------


def _sse(*events: object) -> bytes:
    out = [f"data: {json.dumps(e) if not isinstance(e, str) else e}\n\n" for e in events]
    return "".join(out).encode()


def _chunk(content: str | None = None, **extra: object) -> dict:
    delta = {} if content is None else {"content": content}
    return {"choices": [{"index": 0, "delta": delta}], **extra}


_GOOD = _sse(
    {"choices": [{"delta": {"role": "assistant"}}]},
    _chunk("a"),
    _chunk("b"),
    _chunk(None, usage={"prompt_tokens": 7, "completion_tokens": 2}),
    "[DONE]",
)


# -- the fake server itself (its health, models and process mode) -----------------------------


def _module(*args: str) -> list[str]:
    return [sys.executable, "-m", "kvtune.testing.fake_server", *args]


@pytest.mark.parametrize("flag", ["--no-such-flag", "--bad-flag-exit"])
def test_fake_process_rejects_flags_with_status_2(flag: str) -> None:
    p = subprocess.run(_module(flag), capture_output=True, text=True, timeout=20)
    assert p.returncode == 2 and "error" in p.stderr


def test_fake_process_serves_then_crashes() -> None:
    port = _free_port()
    with subprocess.Popen(
        _module("--port", str(port), "--ttft-ms", "5", "--itl-ms", "1", "--crash-after-requests", "1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:  # closes the pipe
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 10
            while True:
                try:
                    if httpx.get(url + "/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "fake server did not come up"
                time.sleep(0.02)
            res = run(url, _wl(num_requests=2, concurrency=1, output_tokens=4), BenchOptions("m"))
            assert [s.ok for s in res.samples] == [True, False]
            assert proc.wait(timeout=5) == 1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# -- over real HTTP: the fake server's chunked stream and its health (moved from tests/unit) --


def test_output_tokens_come_from_usage_not_chunk_count() -> None:
    """Over real HTTP: the fake server's chunked stream, read line by line."""
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.005, tokens_per_chunk=4) as srv:
        res = run(srv.base_url, _wl(num_requests=1, concurrency=1), BenchOptions("m"))
    (s,) = res.samples
    assert s.ok and s.output_tokens == 16 and len(s.itl_s) == 3  # 4 chunks of 4 tokens


def test_fake_health_is_503_until_startup_delay_passes() -> None:
    clock = VirtualClock()
    with FakeOpenAIServer(startup_delay_s=0.3, now=clock.monotonic) as srv:
        assert httpx.get(srv.base_url + "/health").status_code == 503
        clock.advance(0.299)
        assert httpx.get(srv.base_url + "/health").status_code == 503
        clock.advance(0.001)
        r = httpx.get(srv.base_url + "/health")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert httpx.get(srv.base_url + "/v1/models").json()["data"][0]["id"] == "fake-model"
