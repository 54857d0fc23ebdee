"""summarize_requests() and percentile() on hand-computed samples (definitions in shared/MEASUREMENT.md)."""

from __future__ import annotations

import math

import pytest

from kvtune.objectives.metrics import RequestSample, percentile, summarize_requests


def _ok(ttft: float, e2el: float, out: int, itl: list[float], prompt: int = 10) -> RequestSample:
    return RequestSample(
        send_time=0.0, ok=True, ttft_s=ttft, e2el_s=e2el, itl_s=itl, prompt_tokens=prompt, output_tokens=out
    )


def test_percentile_linear_interpolation() -> None:
    assert percentile([4, 1, 3, 2], 50) == pytest.approx(2.5)
    assert percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)  # k = 2.7
    assert percentile([1, 2, 3, 4], 0) == 1
    assert percentile([1, 2, 3, 4], 100) == 4
    assert percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))
    assert percentile([1.0, math.inf], 99) == math.inf


def test_tpot_formula() -> None:
    assert _ok(0.1, 0.5, 5, []).tpot_s == pytest.approx(0.1)  # (0.5 - 0.1) / (5 - 1)
    assert _ok(0.1, 0.1, 1, []).tpot_s is None  # undefined for one token
    failed = RequestSample(send_time=0.0, ok=False, ttft_s=0.1, e2el_s=0.5, output_tokens=5)
    assert failed.tpot_s is None


def test_summarize_hand_computed() -> None:
    a = _ok(0.1, 0.5, 5, [0.1] * 4, prompt=10)  # tpot 0.1
    b = _ok(0.3, 1.1, 5, [0.2] * 4, prompt=20)  # tpot 0.2
    c = RequestSample(send_time=0.0, ok=False, error="HTTP 500: boom", prompt_tokens=99, output_tokens=99)
    m = summarize_requests([a, b, c], duration_s=2.0)

    assert m["num_requests"] == 3 and m["completed"] == 2 and m["failed"] == 1
    assert m["error_rate"] == pytest.approx(1 / 3)
    # Throughputs count only successful requests.
    assert m["request_throughput"] == pytest.approx(1.0)
    assert m["output_throughput"] == pytest.approx(5.0)
    assert m["total_input_tokens"] == 30 and m["total_output_tokens"] == 10
    assert m["total_token_throughput"] == pytest.approx(20.0)
    # TTFT: mean over successes; percentiles include the failure as +inf.
    assert m["mean_ttft_ms"] == pytest.approx(200.0)
    assert m["median_ttft_ms"] == pytest.approx(300.0)  # [100, 300, inf]
    assert m["p99_ttft_ms"] == math.inf
    assert m["mean_tpot_ms"] == pytest.approx(150.0)
    assert m["mean_e2el_ms"] == pytest.approx(800.0)
    # ITL pools every gap of every request (8 finite) plus one +inf for the failure.
    assert m["mean_itl_ms"] == pytest.approx(150.0)
    assert m["p50_itl_ms"] == pytest.approx(200.0)  # sorted index 4 of 9
    assert m["p99_itl_ms"] == math.inf


def test_all_successful_has_finite_percentiles() -> None:
    m = summarize_requests([_ok(0.1, 0.5, 5, [0.1] * 4), _ok(0.2, 0.6, 5, [0.1] * 4)], 1.0)
    assert m["error_rate"] == 0.0
    assert m["p99_ttft_ms"] == pytest.approx(199.0)  # 100 + 100 * 0.99
    assert m["p99_itl_ms"] == pytest.approx(100.0)


def test_all_failed_and_empty() -> None:
    m = summarize_requests([RequestSample(send_time=0.0, error="x")], 1.0)
    assert m["error_rate"] == 1.0 and m["request_throughput"] == 0.0
    assert math.isnan(m["mean_ttft_ms"]) and m["p50_ttft_ms"] == math.inf
    assert summarize_requests([], 0.0)["error_rate"] == 1.0  # zero duration does not divide by zero


def test_mean_queue_wait_over_all_sent() -> None:
    a = _ok(0.1, 0.5, 5, [])
    a.queue_wait_s = 0.5
    b = RequestSample(send_time=0.0, error="x", queue_wait_s=1.5)
    assert summarize_requests([a, b], 1.0)["mean_queue_wait_ms"] == pytest.approx(1000.0)


def test_two_failures_give_inf_not_nan() -> None:
    ok = [_ok(0.1, 0.5, 5, [0.1] * 4) for _ in range(30)]
    failed = [RequestSample(send_time=0.0, error="x") for _ in range(2)]
    m = summarize_requests(ok + failed, 1.0)
    assert m["p99_ttft_ms"] == math.inf  # k = 30.69 lies between the two +inf entries


def test_truncated_answers_and_stream_counts_are_counted_and_said() -> None:
    from kvtune.objectives.metrics import sample_notes, truncation_note

    samples = [
        RequestSample(send_time=0.0, ok=True, ttft_s=0.1, e2el_s=1.0, output_tokens=64),
        RequestSample(send_time=0.0, ok=True, ttft_s=0.1, e2el_s=1.0, output_tokens=64, tokens_from_stream=True),
        RequestSample(
            send_time=0.0,
            ttft_s=0.1,
            e2el_s=0.2,
            output_tokens=12,
            truncated=True,
            error="truncated: 12 of 64 tokens (finish_reason length)",
        ),
    ]
    m = summarize_requests(samples, 2.0)
    assert m["truncated_requests"] == 1 and m["tokens_counted_from_stream"] == 1
    assert m["failed"] == 1 and m["total_output_tokens"] == 128  # the short answer adds nothing
    assert m["p99_e2el_ms"] == math.inf  # its short E2EL is not a fast success
    notes = sample_notes(samples)
    assert len(notes) == 2 and "1 of 3 requests truncated" in notes[0]
    assert "truncated: 12 of 64 tokens" in notes[0] and "counted from the stream" in notes[1]
    assert truncation_note(m) == " (1 truncated: answers shorter than max_tokens)"
    assert truncation_note(summarize_requests(samples[:2], 1.0)) == "" and sample_notes(samples[:1]) == []
