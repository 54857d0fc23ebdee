"""The streaming load client against FakeOpenAIServer (known delays) and httpx.MockTransport.

Timing bounds are deliberately generous: they check the definitions (TTFT to the first content
chunk, TPOT from usage tokens), not the scheduler's precision.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time

import httpx
import pytest

from kvtune.bench.client import BenchRun, run
from kvtune.bench.workload import Workload
from kvtune.testing.fake_server import FakeOpenAIServer


def _wl(**kw: object) -> Workload:
    base = dict(concurrency=2, prompt_tokens=30, output_tokens=16, num_requests=2,
                warmup_requests=0, request_timeout_s=10.0)
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- against the fake server ------------------------------------------------------------------

def test_timings_match_known_delays_and_warmup_is_excluded() -> None:
    phases: list[str] = []
    with FakeOpenAIServer(ttft_s=0.2, itl_s=0.02, role_chunk_first=True) as srv:
        res = run(srv.base_url, _wl(warmup_requests=1), "m", on_phase=phases.append)
    assert isinstance(res, BenchRun)
    assert phases == ["warmup", "measuring"]
    assert len(res.samples) == 2 and len(res.warmup_samples) == 1
    assert res.metrics["num_requests"] == 2 and res.metrics["error_rate"] == 0.0
    for s in res.samples:
        assert s.ok, s.error
        # The role-only first chunk arrives at once; TTFT waits for the first content chunk.
        assert s.ttft_s is not None and 0.18 < s.ttft_s < 0.35
        assert s.output_tokens == 16
        assert s.prompt_tokens > 0
        assert len(s.itl_s) == 15
        assert s.tpot_s is not None and 0.015 < s.tpot_s < 0.06
        assert s.server_timings is not None and s.server_timings["predicted_n"] == 16
    assert 0.4 < res.duration_s < 1.5  # 0.2 + 15 * 0.02 = 0.5 s, both in parallel
    assert 15.0 < res.metrics["mean_tpot_ms"] < 60.0
    d = res.to_dict()
    assert d["metrics"]["completed"] == 2 and len(d["samples"]) == 2
    assert json.dumps(d)  # serializable


def test_output_tokens_come_from_usage_not_chunk_count() -> None:
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.005, tokens_per_chunk=4) as srv:
        res = run(srv.base_url, _wl(num_requests=1, concurrency=1), "m")
    (s,) = res.samples
    assert s.ok and s.output_tokens == 16 and len(s.itl_s) == 3  # 4 chunks of 4 tokens


def test_http_error_status_is_a_failed_request() -> None:
    with FakeOpenAIServer(fail_status=503) as srv:
        res = run(srv.base_url, _wl(), "m")
    assert all(not s.ok and s.error.startswith("HTTP 503") for s in res.samples)
    assert res.metrics["error_rate"] == 1.0
    # +inf in principle; percentile() currently interpolates inf-inf to nan (see test_metrics).
    assert not math.isfinite(res.metrics["p99_ttft_ms"])


def test_hung_stream_times_out_promptly() -> None:
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.01, hang_after_tokens=2) as srv:
        t0 = time.perf_counter()
        res = run(srv.base_url, _wl(request_timeout_s=0.5), "m")
        elapsed = time.perf_counter() - t0
    assert elapsed < 3.0
    assert all(not s.ok and "timeout" in s.error for s in res.samples)
    assert res.metrics["error_rate"] == 1.0


def test_connection_refused_is_a_failed_request() -> None:
    res = run(f"http://127.0.0.1:{_free_port()}", _wl(num_requests=1), "m")
    (s,) = res.samples
    assert not s.ok and "Connect" in s.error


def test_server_crash_mid_run_fails_later_requests_without_raising() -> None:
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.001, crash_after_requests=1) as srv:
        res = run(srv.base_url, _wl(num_requests=3, concurrency=1), "m")
    assert [s.ok for s in res.samples] == [True, False, False]
    assert res.metrics["error_rate"] == pytest.approx(2 / 3)


def test_closed_loop_queue_wait_grows_when_slots_are_busy() -> None:
    with FakeOpenAIServer(ttft_s=0.05, itl_s=0.001) as srv:
        res = run(srv.base_url, _wl(num_requests=3, concurrency=1, output_tokens=2), "m")
    waits = [s.queue_wait_s for s in res.samples]
    assert waits[0] < 0.05 and waits[1] > 0.04 and waits[2] > waits[1] + 0.04


# -- request body and stream parsing via MockTransport ----------------------------------------

def _sse(*events: object) -> bytes:
    out = [f"data: {json.dumps(e) if not isinstance(e, str) else e}\n\n" for e in events]
    return "".join(out).encode()


def _chunk(content: str | None = None, **extra: object) -> dict:
    delta = {} if content is None else {"content": content}
    return {"choices": [{"index": 0, "delta": delta}], **extra}


_GOOD = _sse({"choices": [{"delta": {"role": "assistant"}}]}, _chunk("a"), _chunk("b"),
             _chunk(None, usage={"prompt_tokens": 7, "completion_tokens": 2}), "[DONE]")


def _mock(body: bytes, status: int = 200, seen: list[dict] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append({"url": str(request.url), **json.loads(request.content)})
        return httpx.Response(status, content=body,
                              headers={"content-type": "text/event-stream"})
    return httpx.MockTransport(handler)


def test_request_body_and_nonce() -> None:
    seen: list[dict] = []
    res = run("http://fake:1/", _wl(num_requests=4, warmup_requests=2, output_tokens=5), "mdl",
              extra_body={"cache_prompt": False, "temperature": 0.5},
              transport=_mock(_GOOD, seen=seen))
    assert len(seen) == 6 and all(s.ok for s in res.samples)
    for b in seen:
        assert b["url"] == "http://fake:1/v1/chat/completions"
        assert b["model"] == "mdl" and b["max_tokens"] == 5 and b["stream"] is True
        assert b["stream_options"] == {"include_usage": True} and b["ignore_eos"] is True
        assert b["cache_prompt"] is False and b["temperature"] == 0.5  # extra_body merged over
        assert b["messages"][0]["role"] == "user"
    prompts = [b["messages"][0]["content"] for b in seen]
    assert all(p.startswith("[req-0-") for p in prompts)
    assert len({p.split("] ", 1)[0] for p in prompts}) == 6  # warm-up and measured all unique
    s = res.samples[0]
    assert s.output_tokens == 2 and s.prompt_tokens == 7 and len(s.itl_s) == 1


@pytest.mark.parametrize(
    ("body", "status", "expect"),
    [
        (b'{"error": "bad model"}', 404, "HTTP 404: "),
        (_sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}, "[DONE]"), 200,
         "no content"),
        (_sse(_chunk("a"), {"error": {"message": "kv cache full"}}), 200, "kv cache full"),
        (b'error: {"code": 500, "message": "slot died"}\n\n', 200, "slot died"),
    ],
)
def test_failures_are_recorded_not_raised(body: bytes, status: int, expect: str) -> None:
    res = run("http://fake", _wl(num_requests=1), "m", transport=_mock(body, status))
    (s,) = res.samples
    assert not s.ok and expect in s.error
    assert res.metrics["error_rate"] == 1.0


def test_without_usage_falls_back_to_content_chunks() -> None:
    body = _sse(_chunk("a"), _chunk(""), _chunk("b"), _chunk("c"), "[DONE]")
    res = run("http://fake", _wl(num_requests=1), "m", transport=_mock(body))
    (s,) = res.samples
    assert s.ok and s.output_tokens == 3 and s.prompt_tokens == 0


def test_reasoning_content_counts_as_first_token() -> None:
    body = _sse({"choices": [{"delta": {"reasoning_content": "hm"}}]}, _chunk("x"), "[DONE]")
    res = run("http://fake", _wl(num_requests=1), "m", transport=_mock(body))
    (s,) = res.samples
    assert s.ok and s.output_tokens == 2 and len(s.itl_s) == 1


# -- the fake server itself (its health, models and process mode) -----------------------------

def test_fake_health_is_503_until_startup_delay_passes() -> None:
    with FakeOpenAIServer(startup_delay_s=0.3) as srv:
        assert httpx.get(srv.base_url + "/health").status_code == 503
        time.sleep(0.35)
        r = httpx.get(srv.base_url + "/health")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert httpx.get(srv.base_url + "/v1/models").json()["data"][0]["id"] == "fake-model"


def _module(*args: str) -> list[str]:
    return [sys.executable, "-m", "kvtune.testing.fake_server", *args]


@pytest.mark.parametrize("flag", ["--no-such-flag", "--bad-flag-exit"])
def test_fake_process_rejects_flags_with_status_2(flag: str) -> None:
    p = subprocess.run(_module(flag), capture_output=True, text=True, timeout=20)
    assert p.returncode == 2 and "error" in p.stderr


def test_fake_process_serves_then_crashes() -> None:
    port = _free_port()
    proc = subprocess.Popen(_module("--port", str(port), "--ttft-ms", "5", "--itl-ms", "1",
                                    "--crash-after-requests", "1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
        res = run(url, _wl(num_requests=2, concurrency=1, output_tokens=4), "m")
        assert [s.ok for s in res.samples] == [True, False]
        assert proc.wait(timeout=5) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
