"""The streaming load client against the fake OpenAI server and httpx.MockTransport.

Timings are checked on virtual time (MockOpenAI, VirtualClock): the fake's delays are exactly
what the client measures, so the tests check the definitions (TTFT to the first content chunk,
TPOT from usage tokens) to the microsecond, whatever the machine's load. A few tests keep the
refused connection is a transport that refuses. The tests here open no socket and start no
process; those over real HTTP (the fake server's chunked stream, its health) are in
tests/integration/bench/test_client.py.
"""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest

from kvtune.bench.client import BenchOptions, BenchRun, run
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.testing.virtual_time import VirtualClock
from kvtune.workload import Workload

EXACT = 1e-9  # virtual time: only float rounding separates a measured delay from the fake's


def _wl(**kw: object) -> Workload:
    base = dict(
        concurrency=2, prompt_tokens=30, output_tokens=16, num_requests=2, warmup_requests=0, request_timeout_s=10.0
    )
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _on(fake: MockOpenAI, wl: Workload, **options: object) -> BenchRun:
    """Benchmark the virtual fake (its transport, its clock)."""
    return run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock, **options))  # type: ignore[arg-type]


class Refused(httpx.AsyncBaseTransport):
    """A network on which nothing listens: every connection is refused, as httpx reports it."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


def test_timings_match_known_delays_and_warmup_is_excluded() -> None:
    phases: list[str] = []
    res = _on(MockOpenAI(ttft_s=0.2, itl_s=0.02, role_chunk_first=True), _wl(warmup_requests=1), on_phase=phases.append)
    assert isinstance(res, BenchRun)
    assert phases == ["warmup", "measuring"]
    assert len(res.samples) == 2 and len(res.warmup_samples) == 1
    assert res.metrics["num_requests"] == 2 and res.metrics["error_rate"] == 0.0
    for s in res.samples:
        assert s.ok, s.error
        # The role-only first chunk arrives at once; TTFT waits for the first content chunk.
        assert s.ttft_s == pytest.approx(0.2, abs=EXACT)
        assert s.output_tokens == 16
        assert s.prompt_tokens > 0
        assert s.itl_s == pytest.approx([0.02] * 15, abs=EXACT)
        assert s.tpot_s == pytest.approx(0.02, abs=EXACT)
        assert s.server_timings is not None and s.server_timings["predicted_n"] == 16
    assert res.duration_s == pytest.approx(0.5, abs=EXACT)  # 0.2 + 15 * 0.02, both in parallel
    assert res.metrics["mean_tpot_ms"] == pytest.approx(20.0, abs=1e-6)
    d = res.to_dict()
    assert d["metrics"]["completed"] == 2 and len(d["samples"]) == 2
    assert json.dumps(d)  # serializable


def test_http_error_status_is_a_failed_request() -> None:
    res = _on(MockOpenAI(fail_status=503), _wl())
    assert all(not s.ok and s.error.startswith("HTTP 503") for s in res.samples)
    assert res.metrics["error_rate"] == 1.0
    # +inf in principle; percentile() currently interpolates inf-inf to nan (see test_metrics).
    assert not math.isfinite(res.metrics["p99_ttft_ms"])


def test_hung_stream_times_out_at_the_request_timeout() -> None:
    fake = MockOpenAI(ttft_s=0.01, itl_s=0.01, hang_after_tokens=2)
    t0 = fake.clock.monotonic()
    res = _on(fake, _wl(request_timeout_s=0.5))
    assert fake.clock.monotonic() - t0 == pytest.approx(0.5, abs=EXACT)  # both hung in parallel
    assert all(not s.ok and "timeout" in s.error for s in res.samples)
    assert [s.end_time - s.send_time for s in res.samples] == pytest.approx([0.5, 0.5], abs=EXACT)
    assert fake.active == 0  # the timed-out streams left the fake
    assert res.metrics["error_rate"] == 1.0


def test_connection_refused_is_a_failed_request() -> None:
    res = run("http://127.0.0.1:9", _wl(num_requests=1), BenchOptions("m", transport=Refused()))
    (s,) = res.samples
    assert not s.ok and "Connect" in s.error


def test_server_crash_mid_run_fails_later_requests_without_raising() -> None:
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001, crash_after_requests=1), _wl(num_requests=3, concurrency=1))
    assert [s.ok for s in res.samples] == [True, False, False]
    assert all(s.error.startswith("RemoteProtocolError") for s in res.samples[1:])
    assert res.metrics["error_rate"] == pytest.approx(2 / 3)


def test_closed_loop_queue_wait_grows_when_slots_are_busy() -> None:
    res = _on(MockOpenAI(ttft_s=0.05, itl_s=0.001), _wl(num_requests=3, concurrency=1, output_tokens=2))
    # one user: request k waits for the k before it, 0.05 + 0.001 s each
    assert [s.queue_wait_s for s in res.samples] == pytest.approx([0.0, 0.051, 0.102], abs=EXACT)


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


def _mock(body: bytes, status: int = 200, seen: list[dict] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append({"url": str(request.url), **json.loads(request.content)})
        return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def test_request_body_and_nonce() -> None:
    seen: list[dict] = []
    res = run(
        "http://fake:1/",
        _wl(num_requests=4, warmup_requests=2, output_tokens=2),
        BenchOptions("mdl", extra_body={"cache_prompt": False, "temperature": 0.5}, transport=_mock(_GOOD, seen=seen)),
    )
    assert len(seen) == 6 and all(s.ok for s in res.samples)
    for b in seen:
        assert b["url"] == "http://fake:1/v1/chat/completions"
        assert b["model"] == "mdl" and b["max_tokens"] == 2 and b["stream"] is True
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
        (_sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}, "[DONE]"), 200, "no content"),
        (_sse(_chunk("a"), {"error": {"message": "kv cache full"}}), 200, "kv cache full"),
        (b'error: {"code": 500, "message": "slot died"}\n\n', 200, "slot died"),
    ],
)
def test_failures_are_recorded_not_raised(body: bytes, status: int, expect: str) -> None:
    res = run("http://fake", _wl(num_requests=1), BenchOptions("m", transport=_mock(body, status)))
    (s,) = res.samples
    assert not s.ok and expect in s.error
    assert res.metrics["error_rate"] == 1.0


def test_without_usage_falls_back_to_content_chunks() -> None:
    body = _sse(_chunk("a"), _chunk(""), _chunk("b"), _chunk("c"), "[DONE]")
    res = run("http://fake", _wl(num_requests=1, output_tokens=3), BenchOptions("m", transport=_mock(body)))
    (s,) = res.samples
    assert s.ok and s.output_tokens == 3 and s.prompt_tokens == 0
    assert s.tokens_from_stream and res.metrics["tokens_counted_from_stream"] == 1
    assert any("counted from the stream" in n for n in res.notes)


def test_reasoning_content_counts_as_first_token() -> None:
    body = _sse({"choices": [{"delta": {"reasoning_content": "hm"}}]}, _chunk("x"), "[DONE]")
    res = run("http://fake", _wl(num_requests=1, output_tokens=2), BenchOptions("m", transport=_mock(body)))
    (s,) = res.samples
    assert s.ok and s.output_tokens == 2 and len(s.itl_s) == 1


# -- the fake server itself (its health, models and process mode) -----------------------------


# -- metric definitions with controlled timing (async MockTransport streams) ------------------


def _timed(
    events: list[tuple[float, object]], status: int = 200, seen: list[httpx.Request] | None = None
) -> httpx.MockTransport:
    """A stream that sleeps `delay` before each event: (delay_s, event-or-"[DONE]")."""

    async def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)

        async def body():
            for delay, ev in events:
                await asyncio.sleep(delay)
                yield _sse(ev)

        return httpx.Response(status, content=body(), headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def test_ttft_waits_for_content_not_the_role_chunk() -> None:
    events = [
        (0.0, {"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
        (0.2, _chunk("a")),
        (0.05, _chunk("b")),
        (0.0, _chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 2})),
        (0.0, "[DONE]"),
    ]
    res = run(
        "http://fake",
        _wl(num_requests=1, output_tokens=2),
        BenchOptions("m", transport=_timed(events), clock=VirtualClock()),
    )
    (s,) = res.samples
    assert s.ok and s.ttft_s == pytest.approx(0.2, abs=EXACT)


def test_e2el_is_not_moved_by_the_usage_chunk_or_done() -> None:
    events = [
        (0.05, _chunk("a")),
        (0.05, _chunk("b")),
        (0.4, _chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 2})),
        (0.2, "[DONE]"),
    ]
    res = run(
        "http://fake",
        _wl(num_requests=1, output_tokens=2),
        BenchOptions("m", transport=_timed(events), clock=VirtualClock()),
    )
    (s,) = res.samples
    assert s.ok and s.e2el_s == pytest.approx(0.1, abs=EXACT)  # the last content chunk
    assert s.end_time - s.send_time == pytest.approx(0.7, abs=EXACT)  # the stream's end
    assert s.tpot_s == pytest.approx(s.e2el_s - s.ttft_s)  # 2 tokens: one gap


def test_failures_count_and_break_percentile_targets() -> None:
    from kvtune.objectives.targets import parse_target

    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 3:
            return httpx.Response(500, content=b'{"error": "boom"}')
        return httpx.Response(200, content=_GOOD, headers={"content-type": "text/event-stream"})

    res = run(
        "http://fake",
        _wl(num_requests=10, concurrency=1, output_tokens=2),
        BenchOptions("m", transport=httpx.MockTransport(handler)),
    )
    m = res.metrics
    assert m["failed"] == 1 and m["completed"] == 9 and m["error_rate"] == pytest.approx(0.1)
    assert math.isfinite(m["mean_ttft_ms"]) and m["mean_ttft_ms"] < 1000  # successes are fast
    assert m["p99_ttft_ms"] == math.inf  # ...but the failure is +inf in the percentile
    target = parse_target("ttft_p99<10s")
    assert target.margin(m) > 0  # infeasible: a fast mean cannot hide a failed request
    assert parse_target("ttft_p50<10s").margin(m) <= 0


def test_completions_endpoint_body_and_stream() -> None:
    seen: list[dict] = []
    text = _sse(
        {"choices": [{"index": 0, "text": ""}]},  # empty first chunk: not content
        {"choices": [{"index": 0, "text": "hi"}]},
        {"choices": [{"index": 0, "text": " there"}]},
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
        "[DONE]",
    )
    res = run(
        "http://fake",
        _wl(num_requests=2, endpoint="completions", output_tokens=2),
        BenchOptions("mdl", transport=_mock(text, seen=seen)),
    )
    assert res.endpoint == "/v1/completions"
    for b in seen:
        assert b["url"] == "http://fake/v1/completions"
        assert "messages" not in b and b["prompt"].startswith("[req-0-")
        assert b["stream"] is True and b["stream_options"] == {"include_usage": True}
        assert b["max_tokens"] == 2 and b["ignore_eos"] is True
    for s in res.samples:
        assert s.ok and s.output_tokens == 2 and s.prompt_tokens == 9 and len(s.itl_s) == 1


def test_api_key_is_sent_but_never_saved_or_echoed() -> None:
    key = "sk-test-0123456789abcdef-secret"
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 2:  # a server echoing the key back in its error
            return httpx.Response(401, content=f'{{"error": "bad key {key}"}}'.encode())
        return httpx.Response(200, content=_GOOD, headers={"content-type": "text/event-stream"})

    res = run(
        "http://fake",
        _wl(num_requests=3, concurrency=1, output_tokens=2),
        BenchOptions("m", transport=httpx.MockTransport(handler), api_key=key),
    )
    assert all(r.headers["authorization"] == f"Bearer {key}" for r in seen)
    assert [s.ok for s in res.samples] == [True, False, True]
    from kvtune.bench.results_format import to_vllm_json

    saved = json.dumps(res.to_dict()) + json.dumps(to_vllm_json(res, {"model_id": "m"}))
    assert key not in saved and key[:8] not in saved and "HTTP 401" in saved


def test_goodput_counts_requests_meeting_every_slo() -> None:
    from kvtune.bench.client import slo_goodput

    fake = MockOpenAI(ttft_s=0.1, itl_s=0.01)
    res = _on(fake, _wl(num_requests=4), goodput_fn=slo_goodput({"ttft": 99.9}))  # TTFT is 100 ms
    assert res.metrics["request_goodput"] == 0.0
    res = _on(fake, _wl(num_requests=4), goodput_fn=slo_goodput({"ttft": 100.1, "tpot": 10.1}))
    assert res.metrics["request_throughput"] > 0
    assert res.metrics["request_goodput"] == pytest.approx(res.metrics["request_throughput"])
    with pytest.raises(Exception, match="unknown goodput"):
        slo_goodput({"latency": 1})


def test_server_timings_split_ttft_into_queueing_and_prompt() -> None:
    final = _chunk(
        None,
        usage={"prompt_tokens": 30, "completion_tokens": 3},
        timings={"prompt_n": 30, "prompt_ms": 50.0, "predicted_n": 3, "predicted_ms": 40.0, "cache_n": 12},
    )
    events = [(0.15, _chunk("a")), (0.01, _chunk("b")), (0.01, _chunk("c")), (0.0, final), (0.0, "[DONE]")]
    res = run(
        "http://fake",
        _wl(num_requests=2, output_tokens=3),
        BenchOptions("m", transport=_timed(events), clock=VirtualClock()),
    )
    m = res.metrics
    assert m["mean_prompt_ms_server"] == pytest.approx(50.0)
    assert m["mean_queue_ms_server"] == pytest.approx(100.0, abs=1e-6)  # 150 ms TTFT - 50 ms prompt
    assert m["mean_queue_ms_server"] == pytest.approx(m["mean_ttft_ms"] - 50.0)
    assert m["mean_tpot_ms_server"] == pytest.approx(20.0)
    assert m["mean_cached_prompt_tokens_server"] == 12


def test_fake_server_timings_reach_the_summary() -> None:
    res = _on(MockOpenAI(ttft_s=0.1, itl_s=0.005), _wl(num_requests=2))
    m = res.metrics
    assert m["server_timings_requests"] == 2
    assert m["mean_prompt_ms_server"] == pytest.approx(100.0)
    assert m["mean_queue_ms_server"] == pytest.approx(0.0, abs=1e-6)  # an unlimited fake queues nothing


def _metrics_transport(calls: list[str]) -> httpx.MockTransport:
    """/metrics whose counters grow on every scrape; chat streams take ~0.6 s."""
    state = {"scrapes": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            state["scrapes"] += 1
            k = state["scrapes"]
            calls.append("metrics")
            text = (
                # prometheus_client's exposition, as vLLM serves it: TYPE on the base name,
                # samples with _total, plus _created timestamps that are not counts.
                "# HELP vllm:num_preemptions preemptions\n"
                "# TYPE vllm:num_preemptions counter\n"
                f'vllm:num_preemptions_created{{model_name="m",engine="0"}} {1.7e9 + k}\n'
                f'vllm:num_preemptions_total{{model_name="m",engine="0"}} {2 * k}\n'
                f'vllm:num_preemptions_total{{model_name="m",engine="1"}} {k}\n'
                "# TYPE vllm:kv_cache_usage_perc gauge\n"
                f'vllm:kv_cache_usage_perc{{model_name="m"}} {0.1 * k}\n'
                "# TYPE vllm:num_requests_waiting gauge\n"
                f'vllm:num_requests_waiting{{model_name="m"}} {k % 3}\n'
                "# TYPE vllm:e2e_request_latency_seconds histogram\n"
                f'vllm:e2e_request_latency_seconds_bucket{{le="1.0"}} {k}\n'
                f"vllm:e2e_request_latency_seconds_sum {0.5 * k}\n"
                f"vllm:e2e_request_latency_seconds_count {k}\n"
            )
            return httpx.Response(200, content=text.encode())
        calls.append("chat")

        async def body():
            await asyncio.sleep(0.6)
            yield _GOOD

        return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def test_scrape_metrics_keeps_vllm_deltas_and_gauges() -> None:
    calls: list[str] = []
    res = run(
        "http://fake",
        _wl(num_requests=2, warmup_requests=1),
        BenchOptions(
            "m", transport=_metrics_transport(calls), scrape_metrics=True, metrics_interval_s=0.25, clock=VirtualClock()
        ),
    )
    sm = res.server_metrics
    assert sm is not None and sm["available"]
    # warm-up first; then scrapes before the phase, at 0.25 and 0.5 s of the 0.6 s phase, after
    assert calls == ["chat", "metrics", "chat", "chat", "metrics", "metrics", "metrics"]
    assert sm["num_preemptions_delta"] == 3 * (4 - 1)  # scrape 4 minus scrape 1, both engines
    assert sm["max_kv_cache_usage_perc"] == pytest.approx(0.4)  # the gauges of scrapes 2..4
    assert sm["max_num_requests_waiting"] == 2  # 4 % 3 = 1, 3 % 3 = 0, 2 % 3 = 2
    assert sm["histogram_means"]["vllm:e2e_request_latency_seconds"] == pytest.approx(0.5)
    assert "vllm:e2e_request_latency_seconds_bucket" not in sm["deltas"]
    assert "vllm:num_preemptions_created" not in sm["deltas"]
    assert json.dumps(res.to_dict())


def test_scrape_metrics_without_metrics_endpoint_says_why() -> None:
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001), _wl(num_requests=1), scrape_metrics=True)
    assert res.samples[0].ok
    assert res.server_metrics == {
        "available": False,
        "reason": "GET /metrics answered HTTP 404 (llama-server needs --metrics)",
    }


def test_shared_prefix_workload_sends_one_system_prompt_to_the_fraction() -> None:
    seen: list[dict] = []
    wl = _wl(num_requests=8, warmup_requests=0, shared_prefix_fraction=0.25, shared_prefix_tokens=50, output_tokens=2)
    res = run("http://fake", wl, BenchOptions("m", transport=_mock(_GOOD, seen=seen)))
    assert all(s.ok for s in res.samples)
    systems = [b["messages"][0]["content"] for b in seen]
    assert all(b["messages"][0]["role"] == "system" and b["messages"][1]["role"] == "user" for b in seen)
    counts = {s: systems.count(s) for s in systems}
    assert sorted(counts.values()) == [1] * 6 + [2]  # 2 of 8 share one prompt, 6 are unique
    lengths = {len(s.split()) for s in systems}
    assert len(lengths) <= 2 and max(lengths) - min(lengths) <= 1  # same size, same work
    users = [b["messages"][1]["content"] for b in seen]
    assert len({u.split("] ", 1)[0] for u in users}) == 8


def test_dataset_prompts_with_nonce(tmp_path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"prompt": "short one"}\n{"prompt": "a much longer prompt than that"}\n')
    seen: list[dict] = []
    wl = _wl(num_requests=4, dataset=str(p), dataset_max_tokens=3)
    res = run("http://fake", wl, BenchOptions("m", transport=_mock(_GOOD, seen=seen)))
    assert not res.prompt_tokens_exact and "1 prompts kept of 2 records" in res.prompt_source
    for b in seen:
        nonce, text = b["messages"][0]["content"].split("] ", 1)
        assert nonce.startswith("[req-0-") and text == "short one"


def test_dataset_errors_before_any_request(tmp_path) -> None:
    from kvtune.errors import SpecError

    seen: list[dict] = []
    with pytest.raises(SpecError, match="does not exist"):
        run(
            "http://fake",
            _wl(dataset=str(tmp_path / "none.json")),
            BenchOptions("m", transport=_mock(_GOOD, seen=seen)),
        )
    assert seen == []


def test_closed_loop_for_a_duration() -> None:
    res = _on(MockOpenAI(ttft_s=0.05, itl_s=0.001), _wl(concurrency=2, output_tokens=2, duration_s=0.5))
    # each user sends at 0, 0.051, ..., 0.459 s (the next, at 0.51 s, is past the 0.5 s window)
    assert len(res.samples) == 2 * 10 and res.planned is None
    assert all(s.ok for s in res.samples)


def test_synthetic_prompts_say_whether_their_size_is_exact() -> None:
    res = run("http://fake", _wl(num_requests=1), BenchOptions("m", transport=_mock(_GOOD)))
    assert not res.prompt_tokens_exact and "approximation" in res.prompt_source
    assert any("approximate" in n for n in res.notes)


def test_exact_prompts_with_the_demo_vocabulary() -> None:
    pytest.importorskip("gguf")
    from kvtune.errors import KvtuneError
    from kvtune.launchers.models import demo_model_path

    try:
        path = demo_model_path(fetch=False)
    except KvtuneError as e:
        pytest.skip(str(e))
    seen: list[dict] = []
    res = run(
        "http://fake",
        _wl(num_requests=2, prompt_tokens=37),
        BenchOptions("m", transport=_mock(_GOOD, seen=seen), tokenizer=path),
    )
    assert res.prompt_tokens_exact and "exactly 37 tokens" in res.prompt_source
    assert all(len(b["messages"][0]["content"].split()) == 37 for b in seen)


def test_report_rows_and_vllm_json() -> None:
    from kvtune.bench.results_format import metrics_table, to_vllm_json

    res = _on(MockOpenAI(ttft_s=0.05, itl_s=0.005), _wl(num_requests=3))
    rows = metrics_table(res.metrics)
    labels = [r[0] for r in rows]
    assert labels[0] == "Successful requests" and "Mean TTFT (ms)" in labels
    assert "P99 TPOT (ms)" in labels and "Output token throughput (tok/s)" in labels
    assert "Mean queueing = TTFT - prompt (ms)" in labels
    j = to_vllm_json(res, {"model_id": "m", "backend": "openai-chat"})
    for key in (
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_tpot_ms",
        "mean_itl_ms",
        "p99_e2el_ms",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "errors",
        "max_concurrent_requests",
        "max_output_tokens_per_s",
        "model_id",
    ):
        assert key in j, key
    assert j["completed"] == 3 and j["output_lens"] == [16, 16, 16]
    assert j["request_rate"] == "inf" and j["max_concurrency"] == 2
    assert len(j["kvtune"]["samples"]) == 3
    assert j["mean_ttft_ms"] == pytest.approx(res.metrics["mean_ttft_ms"])
    json.dumps(j, allow_nan=False)  # strict JSON


def test_vllm_json_writes_inf_percentiles_as_null() -> None:
    from kvtune.bench.results_format import metrics_table, to_vllm_json

    res = _on(MockOpenAI(fail_status=500), _wl(num_requests=2))
    j = to_vllm_json(res)
    assert j["failed"] == 2 and j["p99_ttft_ms"] is None and j["mean_ttft_ms"] is None
    json.dumps(j, allow_nan=False)
    assert dict(metrics_table(res.metrics))["P99 TTFT (ms)"] == "inf (failed requests)"
