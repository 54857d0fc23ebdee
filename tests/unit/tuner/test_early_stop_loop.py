"""The exact early stop in a measurement: the load client's hook cancels what is in flight, the
repeats share one watch, and a trial that can no longer meet its targets ends early as an
infeasible COMPLETE trial that says why (fake launcher: real processes and storage; in the loop
the load is measured on virtual time, so a loaded machine cannot move a 300 ms TTFT).

The tests here start no process and open no socket (the load client's hook is tested against
MockOpenAI: the fake server as an httpx.MockTransport, on virtual time); those that start
processes are in tests/integration/tuner/test_early_stop_loop.py."""

from __future__ import annotations

from kvtune.bench.client import BenchOptions, BenchRun, run
from kvtune.knobs import Knob
from kvtune.objectives.early_stop import EarlyStop
from kvtune.objectives.metrics import RequestSample
from kvtune.objectives.targets import parse_targets
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.testing.virtual_bench import RecordingFakeLauncher
from kvtune.tuner.trial.measure import measure_repeats
from kvtune.workload import Workload

WL = Workload(
    concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=16, warmup_requests=1, request_timeout_s=10
)


def slow() -> RecordingFakeLauncher:
    """A 300 ms TTFT server, one config; each test its own (the launcher records its commands)."""
    return RecordingFakeLauncher(base_ttft_ms=300, knobs=(Knob("speed", "choices", choices=(1,)),))


def after(n: int):
    """A stop_when that stops on the n-th measured request it hears."""
    heard: list[RequestSample] = []

    def stop_when(sample: RequestSample) -> str | None:
        heard.append(sample)
        return f"stop at {n}" if len(heard) >= n else None

    return stop_when, heard


# ---- the load client's hook ----------------------------------------------------------------
def _on(fake: MockOpenAI, w: Workload, **options: object) -> BenchRun:
    """Benchmark the fake server through its transport, on its virtual clock."""
    return run(fake.base_url, w, BenchOptions("m", transport=fake.transport(), clock=fake.clock, **options))  # type: ignore[arg-type]


def test_closed_loop_stop_cancels_in_flight_requests_and_keeps_what_it_heard():
    stop_when, heard = after(3)
    w = Workload(concurrency=4, prompt_tokens=8, output_tokens=4, num_requests=40, warmup_requests=2)
    srv = MockOpenAI(ttft_s=0.05, itl_s=0.01)
    res = _on(srv, w, stop_when=stop_when)
    sent = srv.chat_requests
    assert res.stopped == "stop at 3" and res.planned == 40
    assert sorted(map(id, res.samples)) == sorted(map(id, heard))  # exactly the ones heard
    assert res.observed == 3 == res.metrics["num_requests"]
    assert len(res.warmup_samples) == 2  # warm-up is never heard
    assert sent <= 2 + 3 + 4  # warm-up, the three heard, at most one in flight per user
    assert 3 < res.sent <= 3 + 4  # the users' requests in flight when it stopped count as sent
    assert res.to_dict()["stopped"] == "stop at 3"


def test_open_loop_stop_sends_nothing_after():
    stop_when, heard = after(2)
    w = Workload(
        concurrency=2,
        prompt_tokens=8,
        output_tokens=4,
        num_requests=40,
        warmup_requests=0,
        mode="open",
        rate=20.0,
        arrival="constant",
    )
    srv = MockOpenAI(ttft_s=0.05, itl_s=0.01)
    res = _on(srv, w, stop_when=stop_when)
    sent = srv.chat_requests
    assert res.stopped == "stop at 2" and res.planned == 40
    assert sorted(map(id, res.samples)) == sorted(map(id, heard))
    assert sent < 40


def test_without_a_stop_the_run_is_whole():
    res = _on(MockOpenAI(ttft_s=0.01, itl_s=0.001), WL, stop_when=lambda s: None)
    assert res.stopped is None and res.observed == res.planned == 16


# ---- the pure pieces (planned count, saving, watched targets, RunWatch: test_stopping.py) ----
def test_an_unresolved_relative_target_is_never_watched():
    # its threshold is NaN until the baseline sets it: judging it would stop every run at once
    rule = EarlyStop(parse_targets(["ttft_p95<1.5x"]), 10)
    assert rule.watched == () and rule.stop is None and rule.observe(_sample(9.0)) is None


def _sample(ttft_s: float) -> RequestSample:
    return RequestSample(
        send_time=0.0, ok=True, ttft_s=ttft_s, end_time=ttft_s + 0.1, output_tokens=4, e2el_s=ttft_s + 0.1
    )


def test_one_watch_spans_the_repeats_and_a_stop_skips_the_rest():
    """Pooled over 3 x 8 planned requests, p95<100ms survives one slow request; the second slow
    one, in repeat 2, decides it, and repeat 3 never runs."""
    script = [[0.01, 0.5] + [0.01] * 6, [0.01, 0.5] + [0.01] * 6, [0.01] * 8]
    calls: list[Workload] = []

    def bench(url: str, w: Workload, options: BenchOptions) -> BenchRun:
        samples = []
        stopped = None
        for ttft in script[len(calls)]:
            samples.append(_sample(ttft))
            stopped = options.stop_when(samples[-1]) if options.stop_when else None
            if stopped:
                break
        calls.append(w)
        return BenchRun(
            samples,
            [],
            1.0,
            {"num_requests": float(len(samples))},
            stopped=stopped,
            planned=w.num_requests,
            sent=len(samples),
        )

    w = Workload(num_requests=8, warmup_requests=1)
    m = measure_repeats(bench, "http://x", w, 3, BenchOptions("m"), parse_targets(["ttft_p95<100ms"]))
    assert len(calls) == 2 and calls[1].warmup_requests == 0
    assert m.stopped == "stopped after 10 of 24 requests: 2 over TTFT 100 ms, p95<100ms can no longer hold"
    assert m.metrics["num_requests"] == 10 and m.metrics["planned_requests"] == 24
    assert m.metrics["early_stopped"] == 1.0
    assert m.metrics["early_stop_saved_s"] == 24 / 10 * 2.0 - 2.0  # two runs of 1 s each
    assert m.metrics["measure_s"] >= 0
