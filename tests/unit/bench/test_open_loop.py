"""Open-loop (request-rate) mode: sends on the precomputed schedule whatever the server does.

No coordinated omission: a slow server must not slow the sending; a client that cannot keep up
must say so (`fell_behind`) instead of quietly offering less load. On virtual time (MockOpenAI,
VirtualClock): the send times are exactly the schedule's, whatever the machine's load.
"""

from __future__ import annotations

import httpx
import pytest

from kvtune.bench.arrivals import arrival_offsets, arrival_offsets_for
from kvtune.bench.client import BenchOptions, run
from kvtune.bench.results_format import metrics_table, to_vllm_json
from kvtune.errors import SpecError
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.testing.virtual_time import VirtualClock
from kvtune.workload import Workload

EXACT = 1e-9


def _open(**kw: object) -> Workload:
    base = dict(
        mode="open",
        rate=20.0,
        concurrency=2,
        prompt_tokens=20,
        output_tokens=4,
        num_requests=20,
        warmup_requests=0,
        request_timeout_s=10.0,
    )
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _on(fake: MockOpenAI, wl: Workload, **options: object):
    return run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock, **options))  # type: ignore[arg-type]


def _sends(res) -> list[float]:
    t0 = min(s.intended_send_time for s in res.samples)
    return [s.send_time - t0 for s in res.samples]


def test_open_loop_sends_on_schedule() -> None:
    wl = _open(rate=25.0, num_requests=25, seed=4)
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001), wl)
    assert res.mode == "open" and not res.fell_behind
    assert all(s.ok for s in res.samples)
    intended = arrival_offsets(25, 25.0, "poisson", seed=4)
    t0 = res.samples[0].intended_send_time
    assert [s.intended_send_time - t0 for s in res.samples] == pytest.approx(intended, abs=1e-9)
    for s in res.samples:
        assert s.schedule_lag_s == pytest.approx(0.0, abs=EXACT)
        assert s.queue_wait_s == pytest.approx(s.schedule_lag_s)
    m = res.metrics
    assert m["p99_schedule_lag_ms"] == pytest.approx(0.0, abs=1e-6)
    assert m["offered_rate"] == 25.0 and m["fell_behind"] == 0.0
    assert _sends(res) == pytest.approx(intended, abs=EXACT)  # sent when due, every one


def test_slow_server_does_not_slow_the_sending() -> None:
    """No coordinated omission: every request takes 1.03 s, yet all 20 go out in 0.95 s."""
    wl = _open(rate=20.0, num_requests=20, arrival="constant")
    res = _on(MockOpenAI(ttft_s=1.0, itl_s=0.01), wl)
    assert all(s.ok for s in res.samples)
    assert [s.ttft_s for s in res.samples] == pytest.approx([1.0] * 20, abs=EXACT)
    assert _sends(res) == pytest.approx([i / 20 for i in range(20)], abs=EXACT)  # not one per 1.03 s
    assert max(s.schedule_lag_s for s in res.samples) == pytest.approx(0.0, abs=EXACT)
    assert not res.fell_behind
    assert res.metrics["max_concurrent_requests"] == 20  # the last is sent before the first ends
    # first send to last end: 0.95 s of sending + 1.0 s TTFT + 3 x 10 ms ITL. A closed loop of 2
    # users would take 10 x 1.03 s for these 20: the open loop did not wait for them.
    assert res.duration_s == pytest.approx(0.95 + 1.03, abs=EXACT)


def test_overloaded_client_flags_fell_behind() -> None:
    """A transport that blocks the event loop 20 ms per request cannot send 200 req/s (the
    virtual clock's `sleep` is that blocking work: 20 ms pass with no task running)."""
    body = (
        b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
        b"data: [DONE]\n\n"
    )

    clock = VirtualClock()

    def handler(request: httpx.Request) -> httpx.Response:
        clock.sleep(0.02)  # blocks the client's event loop: the client is the bottleneck
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    wl = _open(rate=200.0, num_requests=40, arrival="constant", output_tokens=1)
    res = run("http://fake", wl, BenchOptions("m", transport=httpx.MockTransport(handler), clock=clock))
    assert all(s.ok for s in res.samples)
    assert res.fell_behind and res.metrics["fell_behind"] == 1.0
    assert res.metrics["p99_schedule_lag_ms"] > res.metrics["schedule_lag_threshold_ms"] == 50.0
    assert any("fell behind" in n for n in res.notes)
    rows = dict(metrics_table(res.metrics))
    assert rows["Client fell behind"].startswith("YES")
    assert to_vllm_json(res)["kvtune"]["fell_behind"] is True


def test_duration_mode_sends_every_arrival_in_the_window() -> None:
    wl = _open(rate=40.0, duration_s=0.5, seed=9, num_requests=1)
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001), wl)
    assert len(res.samples) == len(arrival_offsets_for(0.5, 40.0, seed=9)) > 5
    assert all(s.ok for s in res.samples)


def test_warmup_is_closed_loop_and_excluded() -> None:
    phases: list[str] = []
    wl = _open(rate=50.0, num_requests=10, warmup_requests=3)
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001), wl, on_phase=phases.append)
    assert phases == ["warmup", "measuring"]
    assert len(res.warmup_samples) == 3 and len(res.samples) == 10
    assert all(s.intended_send_time is None for s in res.warmup_samples)
    assert res.metrics["num_requests"] == 10


# -- the workload's new fields, as study files and flags describe them -------------------------


def test_study_file_workload_accepts_the_new_fields() -> None:
    from kvtune.study.study_file import parse_workload

    wl = parse_workload(
        {
            "mode": "open",
            "rate": 4,
            "arrival": "gamma",
            "burstiness": 0.5,
            "duration_s": 60,
            "endpoint": "completions",
            "dataset": "sharegpt.json",
            "dataset_min_tokens": 4,
            "dataset_max_tokens": 1024,
            "shared_prefix_fraction": 0.5,
            "shared_prefix_tokens": 512,
        }
    )
    assert wl.mode == "open" and wl.rate == 4.0 and wl.burstiness == 0.5
    assert wl.request_tokens == 1024 + 512 + wl.output_tokens
    assert parse_workload({"rate": None, "dataset": None, "dataset_max_tokens": None}) == Workload()


@pytest.mark.parametrize(
    ("raw", "expect"),
    [
        ({"mode": 1}, "workload.mode must be a string"),
        ({"rate": "fast", "mode": "open"}, "workload.rate must be a number"),
        ({"dataset": 3}, "workload.dataset must be a file path"),
        ({"shared_prefix_tokens": 1.5}, "must be an integer"),
        ({"burstiness": True}, "must be a number"),
        ({"mode": "poisson"}, "workload.mode must be one of closed, open"),
        ({"mode": "open", "rate": 0}, "workload.rate must be a positive number"),
        ({"mode": "open", "rate": 1, "arrival": "burst"}, "workload.arrival must be one of"),
        ({"mode": "open", "rate": 1, "burstiness": 2}, "needs arrival: gamma"),
        ({"endpoint": "responses"}, "workload.endpoint must be one of chat, completions"),
        ({"duration_s": -1}, "duration_s must be a positive number"),
        ({"dataset_min_tokens": 10, "dataset_max_tokens": 5}, "is below dataset_min_tokens"),
        ({"shared_prefix_fraction": 1.5}, "between 0 and 1"),
        ({"shared_prefix_fraction": 0.5}, "needs shared_prefix_tokens >= 1"),
    ],
)
def test_bad_workload_fields_are_one_line_spec_errors(raw: dict, expect: str) -> None:
    from kvtune.study.study_file import parse_workload

    with pytest.raises(SpecError) as e:
        parse_workload(raw)
    assert expect in str(e.value) and "\n" not in str(e.value)
