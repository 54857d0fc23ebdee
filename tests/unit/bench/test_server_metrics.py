"""The server's /metrics around the measured phase (bench/server_metrics.py): Prometheus text
parsed (label sets summed, buckets skipped), counters turned into deltas and gauges into
max/mean/last, vLLM's headline figures named, and the `Scraper` reading before, during and after
the phase through an httpx.MockTransport on virtual time (no server, no real waiting)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from kvtune.bench.server_metrics import METRICS_PATH, Scraper, metrics_delta, parse_prometheus
from kvtune.bench.vllm_counters import acceptance_from
from kvtune.testing.virtual_time import VirtualClock

TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0"} 3.0
vllm:num_preemptions_total{engine="1"} 4.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.5"} 1.0
vllm:e2e_request_latency_seconds_sum{engine="0"} 6.0
vllm:e2e_request_latency_seconds_count{engine="0"} 4.0
broken_line_without_value
odd{a="}"} not-a-number
"""


def test_prometheus_text_sums_label_sets_keeps_types_and_skips_buckets():
    values, types = parse_prometheus(TEXT)
    assert values == {
        "vllm:num_requests_running": 2.0,
        "vllm:num_preemptions_total": 7.0,
        "vllm:e2e_request_latency_seconds_sum": 6.0,
        "vllm:e2e_request_latency_seconds_count": 4.0,
    }
    assert types == {
        "vllm:num_requests_running": "gauge",
        "vllm:num_preemptions_total": "counter",
        "vllm:e2e_request_latency_seconds": "histogram",
    }


def test_counters_become_deltas_gauges_their_spread_and_vllms_figures_get_stable_names():
    types = {"vllm:num_requests_waiting": "gauge", "vllm:gpu_cache_usage_perc": "gauge", "requests": "counter"}
    before = {"vllm:num_preemptions_total": 1.0, "lat_sum": 2.0, "lat_count": 2.0, "requests": 10.0}
    after = {
        "vllm:num_preemptions_total": 4.0,
        "lat_sum": 8.0,
        "lat_count": 5.0,
        "requests": 16.0,
        "vllm:num_requests_waiting": 0.0,
        "vllm:gpu_cache_usage_perc": 0.5,
        "new_total": 9.0,  # not there before: no delta
    }
    samples = [{"vllm:num_requests_waiting": 4.0, "vllm:gpu_cache_usage_perc": 0.9}, {"vllm:num_requests_waiting": 2.0}]
    out = metrics_delta(before, after, types, samples)
    assert out["available"] and out["samples"] == 2
    assert out["deltas"] == {"vllm:num_preemptions_total": 3.0, "lat_sum": 6.0, "lat_count": 3.0, "requests": 6.0}
    assert out["histogram_means"] == {"lat": 2.0}
    assert out["gauges"]["vllm:num_requests_waiting"] == {"max": 4.0, "mean": 3.0, "last": 2.0}
    assert out["num_preemptions_delta"] == 3.0
    assert out["max_kv_cache_usage_perc"] == 0.9  # the older vLLM name
    assert (out["max_num_requests_waiting"], out["mean_num_requests_waiting"]) == (4.0, 3.0)
    assert "max_num_requests_running" not in out


def test_a_gauge_never_sampled_during_the_phase_reads_its_last_value():
    out = metrics_delta({}, {"g": 5.0}, {"g": "gauge"}, [])
    assert out["gauges"]["g"] == {"max": 5.0, "mean": 5.0, "last": 5.0} and out["histogram_means"] == {}


def scrape(handler, phase_s: float, interval_s: float = 0.5) -> dict:
    """Run a Scraper around a measured phase of `phase_s` virtual seconds."""
    clock = VirtualClock()

    async def main() -> dict:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            scraper = Scraper(client, "http://srv" + METRICS_PATH, interval_s, secret="sk-123")
            await scraper.start()
            await asyncio.sleep(phase_s)
            return await scraper.finish()

    return clock.run(main())


def test_the_scraper_reads_before_during_and_after_the_phase():
    running = iter(range(100))

    def handler(request: httpx.Request) -> httpx.Response:
        n = next(running)
        return httpx.Response(200, text=f"# TYPE run gauge\nrun {n}\n# TYPE done_total counter\ndone_total {10 * n}\n")

    out = scrape(handler, phase_s=1.25)
    # before (0), two reads during the 1.25 s (at 0.5 and 1.0 s), after (3)
    assert out["samples"] == 3
    assert out["gauges"]["run"] == {"max": 3.0, "mean": pytest.approx(2.0), "last": 3.0}
    assert out["deltas"] == {"done_total": 30.0}


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (404, "GET /metrics answered HTTP 404 (llama-server needs --metrics)"),
        (500, "GET /metrics answered HTTP 500"),
    ],
)
def test_a_server_without_the_endpoint_is_unavailable_with_the_reason(status, reason):
    out = scrape(lambda request: httpx.Response(status), phase_s=1.0)
    assert out == {"available": False, "reason": reason}


def test_a_failed_read_is_unavailable_and_its_reason_never_holds_the_key():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused with Bearer sk-123", request=request)

    out = scrape(handler, phase_s=1.0)
    assert out["available"] is False
    assert out["reason"].startswith("GET /metrics failed: ConnectError") and "sk-123" not in out["reason"]


def test_vllms_spec_decode_counters_give_the_acceptance_rate_and_none_without_drafts():
    names = ("vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total")
    before, after = dict.fromkeys(names, 100.0), {names[0]: 300.0, names[1]: 250.0}
    out = metrics_delta(before, after, dict.fromkeys(names, "counter"), [])
    assert out["spec_acceptance_rate"] == pytest.approx(150 / 200)
    assert acceptance_from(out) == {"spec_acceptance_rate": pytest.approx(0.75)}
    idle = metrics_delta(before, before, dict.fromkeys(names, "counter"), [])
    assert "spec_acceptance_rate" not in idle and acceptance_from(idle) == {} and acceptance_from(None) == {}
