"""The server's own view of a run (bench/server_timing.py): llama-server's per-request timings
split the client's TTFT into queueing and prompt time, and the most requests in flight at once.
Request samples built in the test: no server, no clock."""

from __future__ import annotations

import pytest

from kvtune.bench.server_timing import max_concurrency, server_timing_summary
from kvtune.objectives.metrics import RequestSample


def answered(ttft_s: float, **timings) -> RequestSample:
    return RequestSample(send_time=0.0, ok=True, ttft_s=ttft_s, e2el_s=ttft_s + 0.1, server_timings=timings)


def test_the_wait_for_a_slot_is_client_ttft_minus_the_servers_prompt_time():
    samples = [
        answered(0.150, prompt_ms=50.0, predicted_n=3, predicted_ms=40.0, cache_n=12),
        answered(0.300, prompt_ms=100.0, predicted_n=5, predicted_ms=80.0, cache_n=0),
    ]
    out = server_timing_summary(samples)
    assert out["server_timings_requests"] == 2.0
    assert out["mean_prompt_ms_server"] == pytest.approx(75.0)
    assert out["mean_queue_ms_server"] == pytest.approx(150.0)  # (100 + 200) / 2
    assert out["median_queue_ms_server"] == pytest.approx(150.0)
    assert out["p99_prompt_ms_server"] == pytest.approx(50.0 + 0.99 * 50.0)
    assert out["mean_tpot_ms_server"] == pytest.approx((40.0 / 2 + 80.0 / 4) / 2)  # per token after the first
    assert out["mean_cached_prompt_tokens_server"] == pytest.approx(6.0)


def test_without_timings_the_summary_is_empty():
    failed = RequestSample(send_time=0.0, ok=False, ttft_s=0.1, server_timings={"prompt_ms": 10.0})
    no_timings = RequestSample(send_time=0.0, ok=True, ttft_s=0.1)
    bad = answered(0.1, prompt_ms="n/a")
    assert server_timing_summary([]) == {}
    assert server_timing_summary([failed, no_timings, bad]) == {}


def test_decode_and_cache_figures_only_from_requests_that_report_them():
    out = server_timing_summary([answered(0.2, prompt_ms=20.0, predicted_n=1, predicted_ms=5.0)])
    assert out["mean_queue_ms_server"] == pytest.approx(180.0)
    assert "mean_tpot_ms_server" not in out  # one token: no time per output token
    assert "mean_cached_prompt_tokens_server" not in out


def span(start: float, end: float | None) -> RequestSample:
    return RequestSample(send_time=start, ok=end is not None, end_time=end)


def test_max_concurrency_counts_the_overlap_of_send_to_end_intervals():
    assert max_concurrency([span(0, 3), span(1, 4), span(2, 5), span(4.5, 6)]) == 3
    assert max_concurrency([span(0, 1), span(2, 3)]) == 1
    assert max_concurrency([]) == 0


def test_a_request_ending_as_another_is_sent_does_not_overlap_it():
    assert max_concurrency([span(0, 1), span(1, 2)]) == 1  # the end is counted before the send


def test_a_request_that_never_ended_is_not_counted():
    assert max_concurrency([span(0, None), span(0, 2)]) == 1


def test_the_acceptance_rate_is_accepted_over_drafted_tokens_of_the_requests_that_drafted():
    samples = [
        answered(0.1, prompt_ms=10.0, draft_n=10, draft_n_accepted=8),
        answered(0.1, prompt_ms=10.0, draft_n=30, draft_n_accepted=12),
        answered(0.1, prompt_ms=10.0),  # a request the server did not speculate on counts nothing
    ]
    out = server_timing_summary(samples)
    assert out["spec_acceptance_rate"] == pytest.approx(20 / 40) and out["spec_draft_tokens_server"] == 40.0
    assert "spec_acceptance_rate" not in server_timing_summary([answered(0.1, prompt_ms=10.0, draft_n=0)])
