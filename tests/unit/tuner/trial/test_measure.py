"""The capacity search on injected fake benches: steady-state levels, the re-check of the first
break, and levels where the client (not the server) was the limit.

Each fake bench answers from the load it was asked for, so the right capacity is known; it also
records the workloads and options it got, so the shape of each level (warm-up, waves, ramp,
open-loop duration) is checked without a server or a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.energy import EnergyReading, EnergySource
from kvtune.objectives.targets import parse_target
from kvtune.tuner.trial.capacity import CapacityPlan, measure_capacity
from kvtune.tuner.trial.measure import measure_repeats
from kvtune.tuner.trial.phase_window import MeteredBench, account
from kvtune.workload import Workload

CLOSED = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=3)
OPEN = Workload(
    mode="open", rate=1.0, concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=32, warmup_requests=2
)
TTFT = [parse_target("ttft_p95<850ms")]


@dataclass
class FakeBench:
    """TTFT p95 = 100 ms x load (held up to 8 users / 8 req/s under ttft<850ms); `noisy` loads
    break on their first measurement only; from `client_limit` on, the client falls behind."""

    noisy: set[float] = field(default_factory=set)
    client_limit: float | None = None
    calls: list[tuple[Workload, BenchOptions]] = field(default_factory=list)

    def __call__(self, base_url: str, w: Workload, options: BenchOptions) -> BenchRun:
        self.calls.append((w, options))
        if options.on_phase is not None:  # as the real client reports them
            if w.warmup_requests > 0:
                options.on_phase("warmup")
            options.on_phase("measuring")
        load = float(w.rate) if w.mode == "open" else float(w.concurrency)
        ttft = 100.0 * load
        if load in self.noisy and not any(_load(c) == load for c, _ in self.calls[:-1]):
            ttft = 5000.0  # the first burst at this level
        behind = self.client_limit is not None and load >= self.client_limit
        metrics = {
            "p95_ttft_ms": ttft,
            "mean_e2el_ms": 200.0 + 10 * load,
            "error_rate": 0.0,
            "output_throughput": 10.0 * load,
        }
        return BenchRun([], [], 1.0, metrics, mode=w.mode, fell_behind=behind)

    def loads(self) -> list[float]:
        return [_load(w) for w, _ in self.calls]


def _load(w: Workload) -> float:
    return float(w.rate) if w.mode == "open" else float(w.concurrency)


def test_a_noisy_level_is_rechecked_and_no_longer_caps_capacity() -> None:
    bench = FakeBench(noisy={4.0})
    m = measure_capacity(bench, "http://x", CLOSED, TTFT, BenchOptions("m"))
    assert m.capacity == 8  # before: 4 broke once, so capacity was 3 forever
    levels = [(r["load"], r["status"], r["recheck"]) for r in m.runs]
    assert levels[:4] == [(1.0, "held", False), (2.0, "held", False), (4.0, "broke", False), (4.0, "held", True)]
    assert m.metrics["capacity"] == 8 and m.metrics["p95_ttft_ms"] == 800.0
    assert "capacity_client_limited" not in m.metrics


def test_the_first_real_break_is_measured_twice_then_bisection_once_each() -> None:
    bench = FakeBench()
    m = measure_capacity(bench, "http://x", CLOSED, TTFT, BenchOptions("m"))
    assert m.capacity == 8
    # the first break and the final held level (issue 22 §6) are measured twice
    assert bench.loads() == [1, 2, 4, 8, 16, 16, 12, 10, 9, 8]
    assert [r["recheck"] for r in m.runs].count(True) == 2
    assert all(r["met"] == (r["status"] == "held") for r in m.runs)


def test_without_recheck_one_break_ends_the_doubling() -> None:
    bench = FakeBench(noisy={4.0})
    m = measure_capacity(bench, "http://x", CLOSED, TTFT, BenchOptions("m"), plan=CapacityPlan(recheck=False))
    assert m.capacity == 3


def test_a_client_that_falls_behind_is_client_limited_not_held() -> None:
    bench = FakeBench(client_limit=4.0)  # the server would hold up to 8 req/s
    m = measure_capacity(bench, "http://x", OPEN, TTFT, BenchOptions("m"))
    # below 4 req/s the client kept up: bisection between 2 and 4 (resolution 0.25) ends at 3.75;
    # before, fell_behind was ignored and 4 and 8 req/s counted as held (capacity 8)
    assert m.capacity == 3.75
    limited = [r for r in m.runs if r["status"] == "client-limited"]
    assert limited and all(r["load"] >= 4.0 and not r["met"] and not r["recheck"] for r in limited)
    assert 4.0 in [r["load"] for r in limited] and 8.0 not in bench.loads()  # no load above it
    assert m.metrics["capacity_client_limited"] == 1.0


def test_a_server_break_below_the_client_limit_is_the_servers_capacity() -> None:
    bench = FakeBench(client_limit=16.0)
    m = measure_capacity(bench, "http://x", OPEN, TTFT, BenchOptions("m"))
    assert 8.0 <= m.capacity < 9.0 and "capacity_client_limited" not in m.metrics


def test_closed_levels_warm_up_ramp_in_and_run_several_waves() -> None:
    bench = FakeBench()
    measure_capacity(bench, "http://x", CLOSED, TTFT, BenchOptions("m"))
    plan = CapacityPlan()
    for i, (w, options) in enumerate(bench.calls):
        users = w.concurrency
        assert w.warmup_requests >= plan.warmup_waves * users  # a warm-up at every level
        assert w.num_requests >= plan.waves * users and w.num_requests >= CLOSED.num_requests
        if i == 0:
            assert w.warmup_requests == max(CLOSED.warmup_requests, users) and options.ramp_s == 0
        else:  # users ramp in over one typical request: the previous level's mean E2EL
            prev = bench.calls[i - 1][0].concurrency
            assert options.ramp_s == pytest.approx((200.0 + 10 * prev) / 1000.0)


def test_open_levels_run_for_a_duration_so_higher_rates_are_not_shorter() -> None:
    bench = FakeBench()
    measure_capacity(bench, "http://x", OPEN, TTFT, BenchOptions("m"))
    plan = CapacityPlan()
    durations = {w.rate: w.duration_s for w, _ in bench.calls}
    assert durations[0.5] == 64.0 and durations[1.0] == 32.0  # num_requests / rate
    for rate, d in durations.items():
        assert d >= plan.min_open_duration_s and d >= OPEN.num_requests / rate
        assert d * rate >= OPEN.num_requests  # never fewer requests than the workload asks
    # the warm-up keeps as many users busy as the rate needs (rate x typical request duration)
    w8 = next(w for w, _ in bench.calls if w.rate == 8.0)
    assert w8.concurrency >= 2 and w8.warmup_requests >= w8.concurrency


class FakeMeter:
    """Each benchmark run's window: 10 J per load unit over 1 s (so 10 x load watts)."""

    source = EnergySource.RAPL

    def __init__(self, bench: FakeBench):
        self.bench = bench
        self.started = 0

    def start(self) -> None:
        self.started += 1

    def stop(self) -> EnergyReading:
        return EnergyReading(10.0 * self.bench.loads()[-1], 1.0, self.source)


def test_energy_and_cost_come_from_the_runs_the_metrics_are_from() -> None:
    fake = FakeBench()
    bench = MeteredBench(fake, FakeMeter(fake))
    m = account(measure_capacity(bench, "http://x", CLOSED, TTFT, BenchOptions("m")), bench, 3.6)
    assert m.capacity == 8 and bench.meter.started == len(fake.calls) > 1
    # the chosen level (8 users) alone: 80 W at 80 tok/s -> 1 J per output token
    assert m.metrics["avg_watts"] == pytest.approx(80.0)
    assert m.metrics["joules_per_output_token"] == pytest.approx(1.0)
    # $3.60/h at 80 tok/s: 3.6 / (80 * 3600) * 1e6 = 12.5
    assert m.metrics["cost_per_mtok"] == pytest.approx(12.5)


def test_without_a_meter_or_price_the_metrics_are_unchanged() -> None:
    fake = FakeBench()
    bench = MeteredBench(fake, None)
    m = account(measure_repeats(bench, "http://x", CLOSED, 2, BenchOptions("m")), bench, None)
    assert not {"avg_watts", "energy_j", "cost_per_mtok", "usd_per_hour"} & set(m.metrics)


@dataclass
class FlakyHeldBench(FakeBench):
    """Like `FakeBench`, but `lucky` loads hold on their first measurement only (a quiet burst):
    without a re-check of the final held level, the bisection would keep them."""

    lucky: set[float] = field(default_factory=set)

    def __call__(self, base_url: str, w: Workload, options: BenchOptions) -> BenchRun:
        run = super().__call__(base_url, w, options)
        load = _load(w)
        if load in self.lucky and [_load(c) for c, _ in self.calls].count(load) == 1:
            run.metrics["p95_ttft_ms"] = 100.0  # held by luck
        elif load in self.lucky:
            run.metrics["p95_ttft_ms"] = 5000.0
        return run


def test_the_final_held_level_is_rechecked_and_steps_down_when_it_breaks_now() -> None:
    # issue 22 §6: 16 broke twice; 12 users hold once by luck during the bisection (14, 13 break);
    # the re-check of 12 breaks, so the capacity steps down to the next held level, 8, re-checked too
    bench = FlakyHeldBench(lucky={12.0})
    m = measure_capacity(bench, "http://x", CLOSED, TTFT, BenchOptions("m"))
    assert bench.loads() == [1, 2, 4, 8, 16, 16, 12, 14, 13, 12, 8]
    assert m.capacity == 8 and m.metrics["p95_ttft_ms"] == 800.0
    rechecks = [(r["load"], r["status"]) for r in m.runs if r["recheck"]]
    assert rechecks == [(16.0, "broke"), (12.0, "broke"), (8.0, "held")]


def test_repeats_pool_vllms_acceptance_rate_over_every_runs_drafted_tokens() -> None:
    drafted, accepted = "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total"
    counts = iter([(100.0, 90.0), (300.0, 60.0)])

    def bench(base_url: str, w: Workload, options: BenchOptions) -> BenchRun:
        d, a = next(counts)
        run = BenchRun([], [], 1.0, {"spec_acceptance_rate": a / d}, mode=w.mode)
        run.server_metrics = {"deltas": {drafted: d, accepted: a}, "spec_acceptance_rate": a / d}
        return run

    m = measure_repeats(bench, "http://x", CLOSED, 2, BenchOptions("m"))
    assert m.metrics["spec_acceptance_rate"] == pytest.approx(150 / 400)  # not the mean of 0.9 and 0.2


def test_a_known_break_bounds_the_search_below_it_and_is_never_measured() -> None:
    """What would work (issue 41): the nearest miss broke at the load asked, so the search stays
    below it: 1, 2, 4 held, 8 is the known break; 6 and 7 bisect, the final held level re-checked."""
    bench = FakeBench()
    plan = CapacityPlan(ceiling=8.0)
    m = measure_capacity(bench, "http://x", CLOSED, [parse_target("ttft_p95<650ms")], BenchOptions("m"), plan=plan)
    assert m.capacity == 6
    assert 8.0 not in bench.loads()
    assert "capacity_bounded" not in m.metrics


def test_a_level_cap_ends_the_search_with_the_highest_held_level_and_says_it_is_bounded() -> None:
    bench = FakeBench()
    plan = CapacityPlan(ceiling=64.0, max_levels=4)
    m = measure_capacity(bench, "http://x", CLOSED, TTFT, BenchOptions("m"), plan=plan)
    assert len(m.runs) <= 4
    assert m.metrics["capacity_bounded"] == 1.0
    assert m.capacity is not None and 0 < m.capacity <= 8  # a level that held, re-checked: a lower bound of the true 8


def test_a_ceiling_at_the_lowest_level_has_nothing_to_measure() -> None:
    with pytest.raises(AssertionError, match="no level to measure"):
        measure_capacity(FakeBench(), "http://x", CLOSED, TTFT, BenchOptions("m"), plan=CapacityPlan(ceiling=1.0))
