"""A truncated answer is a failed request, and a missing token count is counted, never 0.

With ``ignore_eos`` and ``max_tokens=N`` every answer must have N tokens; fewer means the context
filled up (prompt + chat template + output did not fit a slot) or the server ignored
``ignore_eos``, and a short answer must not pass for a fast one. Against the fake server's
`truncate_at` and `omit_usage` (MockOpenAI: the fake as an httpx.MockTransport, on virtual
time), and canned streams through httpx.MockTransport.

The tests here start no process and open no socket; those that start processes are in
tests/integration/bench/test_truncation.py.
"""

from __future__ import annotations

import json
import math

import httpx
import pytest

from kvtune.bench.client import BenchOptions, BenchRun, run
from kvtune.objectives.targets import parse_target
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload


def _wl(**kw: object) -> Workload:
    base = dict(
        concurrency=2, prompt_tokens=20, output_tokens=64, num_requests=3, warmup_requests=0, request_timeout_s=10.0
    )
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _on(fake: MockOpenAI, wl: Workload, **options: object) -> BenchRun:
    """Benchmark the fake server through its transport, on its virtual clock."""
    return run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock, **options))  # type: ignore[arg-type]


def _mock(*events: object) -> httpx.MockTransport:
    body = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events).encode()
    return httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )


def _chunk(text: str | None, finish: str | None = None, **extra: object) -> dict:
    delta = {} if text is None else {"content": text}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


@pytest.mark.parametrize("finish", ["length", "stop"])
def test_an_answer_shorter_than_max_tokens_is_a_failed_truncated_request(finish: str) -> None:
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001, truncate_at=12, truncate_finish=finish), _wl())
    for s in res.samples:
        assert not s.ok and s.truncated
        assert s.error.startswith("truncated: 12 of 64 tokens") and finish in s.error
        assert s.output_tokens == 12 and s.ttft_s is not None  # what arrived is kept for diagnosis
    m = res.metrics
    assert m["error_rate"] == 1.0 and m["truncated_requests"] == 3 and m["completed"] == 0
    assert m["p95_e2el_ms"] == math.inf  # a short answer is not a fast one
    assert m["output_throughput"] == 0.0
    assert parse_target("error_rate<1%").margin(m) > 0
    assert any("3 of 3 requests truncated" in n for n in res.notes)


def test_full_answers_are_not_truncated() -> None:
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001, truncate_at=64), _wl())
    assert all(s.ok and not s.truncated for s in res.samples)
    assert res.metrics["truncated_requests"] == 0 and res.metrics["tokens_counted_from_stream"] == 0
    assert not any("truncated" in n or "counted from the stream" in n for n in res.notes)


def test_without_ignore_eos_a_short_answer_is_the_model_stopping() -> None:
    res = _on(
        MockOpenAI(ttft_s=0.01, itl_s=0.001, truncate_at=12, truncate_finish="stop"),
        _wl(),
        extra_body={"ignore_eos": False},
    )
    assert all(s.ok and s.output_tokens == 12 for s in res.samples)


def test_without_usage_tokens_are_counted_from_the_stream_and_the_run_says_so() -> None:
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001, omit_usage=True), _wl(output_tokens=16))
    for s in res.samples:
        assert s.ok and s.tokens_from_stream and s.output_tokens == 16  # one per content chunk
    assert res.metrics["tokens_counted_from_stream"] == 3
    assert res.metrics["total_output_tokens"] == 48
    assert any("3 of 3 answers carried no usage.completion_tokens" in n for n in res.notes)


def test_without_usage_a_truncation_is_still_seen() -> None:
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001, omit_usage=True, truncate_at=5), _wl(output_tokens=16))
    assert all(s.truncated and s.error.startswith("truncated: 5 of 16 tokens") for s in res.samples)
    assert res.metrics["tokens_counted_from_stream"] == 3


def test_usage_without_completion_tokens_is_never_zero() -> None:
    """Usage with only prompt_tokens: the count comes from the stream, the prompt from usage."""
    t = _mock(
        _chunk("a"), _chunk("b"), _chunk(None, "length"), {"choices": [], "usage": {"prompt_tokens": 9}}, "[DONE]"
    )
    res = run("http://fake", _wl(output_tokens=2, num_requests=1), BenchOptions("m", transport=t))
    (s,) = res.samples
    assert s.ok and s.output_tokens == 2 and s.prompt_tokens == 9 and s.tokens_from_stream


def test_server_timings_count_tokens_when_chunks_carry_several() -> None:
    """llama-server's timings.predicted_n says how many tokens the chunks held."""
    t = _mock(_chunk("a b"), _chunk("c d"), _chunk(None, "length", timings={"predicted_n": 4}), "[DONE]")
    res = run("http://fake", _wl(output_tokens=4, num_requests=1), BenchOptions("m", transport=t))
    (s,) = res.samples
    assert s.ok and s.output_tokens == 4 and s.tokens_from_stream


def test_usage_is_trusted_over_the_chunk_count() -> None:
    t = _mock(_chunk("a b c"), _chunk(None, "length", usage={"prompt_tokens": 3, "completion_tokens": 2}), "[DONE]")
    res = run("http://fake", _wl(output_tokens=3, num_requests=1), BenchOptions("m", transport=t))
    (s,) = res.samples
    assert s.truncated and s.error.startswith("truncated: 2 of 3 tokens")
    assert not s.tokens_from_stream
