"""Capacity on a trace: the speed search on a fake measurement function (a probe that answers from
the speed it is asked for, so the right capacity is known), and the trial's glue on a fake bench
that records the workloads it was given. No process, no socket, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.errors import SpecError
from kvtune.objectives.targets import parse_target
from kvtune.study.capacity_text import (
    TRACE_SPEED_KEY,
    capacity_figure,
    capacity_unit,
    outcome_sentence,
    trace_capacity_sentence,
)
from kvtune.study.spec import StudySpec
from kvtune.tuner.trial.capacity import LevelStatus, SpeedPlan, measure_trace_capacity, search_speed
from kvtune.workload import Workload

HELD, BROKE, LIMITED = LevelStatus.HELD, LevelStatus.BROKE, LevelStatus.CLIENT_LIMITED


@dataclass
class Probe:
    """Holds every speed up to `limit`; `lucky` speeds hold once above it (their first replay),
    `noisy` ones break once below it; from `client_limit` on the client falls behind."""

    limit: float
    lucky: set[float] = field(default_factory=set)
    noisy: set[float] = field(default_factory=set)
    client_limit: float | None = None
    calls: list[tuple[float, bool]] = field(default_factory=list)

    def __call__(self, speed: float, recheck: bool) -> LevelStatus:
        first = speed not in [s for s, _ in self.calls]
        self.calls.append((speed, recheck))
        if self.client_limit is not None and speed >= self.client_limit:
            return LIMITED
        if speed in self.noisy and first:
            return BROKE
        if speed in self.lucky and first:
            return HELD
        return HELD if speed <= self.limit else BROKE

    def speeds(self) -> list[float]:
        return [s for s, _ in self.calls]


def test_doubles_from_1x_then_bisects_to_10_percent_and_rechecks_the_speed_found() -> None:
    probe = Probe(limit=2.6)
    found = search_speed(probe)
    # 1, 2 hold; 4 breaks twice (re-checked); bisect 3 -> 2.5 -> 2.75 (gap 0.25 <= 10% of 2.5)
    assert probe.calls == [
        (1.0, False),
        (2.0, False),
        (4.0, False),
        (4.0, True),
        (3.0, False),
        (2.5, False),
        (2.75, False),
        (2.5, True),
    ]
    assert found.held == 2.5 and not found.at_cap and not found.client_limited


def test_the_resolution_is_stated_relative_to_the_speed_held() -> None:
    for limit in (1.3, 5.9, 17.0):
        found = search_speed(Probe(limit=limit))
        assert limit / 1.1 <= found.held <= limit  # within 10% below the true capacity


def test_a_box_that_cannot_serve_1x_is_searched_down_to_the_floor() -> None:
    probe = Probe(limit=0.6)
    found = search_speed(probe)
    # 1x breaks twice, 0.5 holds, bisect 0.75 -> 0.625 -> 0.5625 (gap 0.0625 > 0.05) -> ...
    assert probe.speeds()[:4] == [1.0, 1.0, 0.5, 0.75]
    assert 0.6 / 1.1 <= found.held <= 0.6 and found.lowest == 0.5


def test_nothing_held_down_to_the_floor_is_capacity_zero() -> None:
    probe = Probe(limit=0.1)
    found = search_speed(probe)
    assert probe.speeds() == [1.0, 1.0, 0.5, 0.25] and found.held == 0.0 and found.lowest == 0.25


def test_holding_up_to_the_cap_is_a_lower_bound() -> None:
    found = search_speed(Probe(limit=1000.0), SpeedPlan(cap=8.0))
    assert found.held == 8.0 and found.at_cap


def test_a_noisy_first_break_is_rechecked_and_does_not_cap_the_search() -> None:
    probe = Probe(limit=8.0, noisy={2.0})
    found = search_speed(probe)
    assert probe.calls[:3] == [(1.0, False), (2.0, False), (2.0, True)]
    assert found.held == 8.0


def test_a_lucky_bisected_speed_is_stepped_down_when_its_recheck_breaks() -> None:
    probe = Probe(limit=2.0, lucky={3.0})
    found = search_speed(probe)
    # 3 held once by luck, so bisection went on above it; its re-check breaks: 2 (held) re-checked
    assert (3.0, True) in probe.calls and found.held == 2.0 and probe.calls[-1] == (2.0, True)


def test_the_client_falling_behind_is_not_held_and_nothing_faster_is_tried() -> None:
    probe = Probe(limit=100.0, client_limit=4.0)
    found = search_speed(probe)
    assert found.client_limited and 2.0 <= found.held < 4.0
    assert max(probe.speeds()) == 4.0 and (4.0, True) not in probe.calls  # a client limit is not re-checked


def test_without_recheck_each_speed_is_measured_once() -> None:
    probe = Probe(limit=2.6)
    found = search_speed(probe, SpeedPlan(recheck=False))
    assert not any(r for _, r in probe.calls) and found.held == 2.5


@dataclass
class FakeBench:
    """A replay breaks ttft_p95<1s above `limit`x speed (TTFT 300 ms x speed); records workloads."""

    limit: float = 2.6
    calls: list[Workload] = field(default_factory=list)

    def __call__(self, base_url: str, w: Workload, options: BenchOptions) -> BenchRun:
        self.calls.append(w)
        ttft = 1000.0 * w.trace_speed / self.limit
        metrics = {"p95_ttft_ms": ttft, "error_rate": 0.0, "offered_rate": 1.5 * w.trace_speed}
        return BenchRun([], [], 1.0, metrics, mode="open")


TRACE = Workload(trace="azure-conv", trace_requests=8, warmup_requests=3)
TTFT = [parse_target("ttft_p95<1s")]


def test_the_trial_measures_each_speed_as_a_replay_of_the_same_requests() -> None:
    bench = FakeBench()
    m = measure_trace_capacity(bench, "http://x", TRACE, TTFT, BenchOptions("m"))
    assert m.capacity == 2.5 and m.metrics["capacity"] == 2.5 and m.metrics[TRACE_SPEED_KEY] == 2.5
    assert [w.trace_speed for w in bench.calls] == [1.0, 2.0, 4.0, 4.0, 3.0, 2.5, 2.75, 2.5]
    assert {w.trace_requests for w in bench.calls} == {8}  # the same requests at every speed
    assert [w.warmup_requests for w in bench.calls] == [3] + [0] * 7  # warm-up before the first only
    assert m.metrics["p95_ttft_ms"] == pytest.approx(1000 * 2.5 / 2.6)  # the speed found's figures
    assert m.metrics["capacity_rechecked"] == 1.0 and "capacity_at_cap" not in m.metrics
    assert [(r["load"], r["status"], r["unit"]) for r in m.runs][:3] == [
        (1.0, "held", "x recorded rate"),
        (2.0, "held", "x recorded rate"),
        (4.0, "broke", "x recorded rate"),
    ]
    assert m.chosen == [m.bench_runs[-1]]  # the re-check at 2.5x


def test_a_trial_that_holds_no_speed_reports_the_slowest_replay() -> None:
    m = measure_trace_capacity(FakeBench(limit=0.1), "http://x", TRACE, TTFT, BenchOptions("m"))
    assert m.capacity == 0.0 and m.metrics[TRACE_SPEED_KEY] == 0.0
    assert m.metrics["offered_rate"] == pytest.approx(1.5 * 0.25)  # the metrics of 0.25x
    assert trace_capacity_sentence(m.metrics) == (
        "does not hold this trace even at 0.25x its recorded rate: a target breaks at every speed tried"
    )


def test_the_capacity_is_said_with_its_unit() -> None:
    m = measure_trace_capacity(FakeBench(), "http://x", TRACE, TTFT, BenchOptions("m")).metrics
    assert capacity_figure(m) == "2.5x recorded rate" and capacity_figure({"capacity": 8.0}) == "8"
    assert trace_capacity_sentence(m) == (
        "holds this trace at 2.5x its recorded rate (3.75 req/s offered) with every target met, "
        "re-checked at that speed"
    )
    assert trace_capacity_sentence({"capacity": 8.0}) is None  # users: no trace sentence
    again = {**m, TRACE_SPEED_KEY: 2.0, "capacity": 2.0, "offered_rate": 3.0}
    assert outcome_sentence({"metrics": again}, m).startswith("holds this trace at 2x")  # re-measured first
    assert capacity_unit(TRACE) == "x recorded rate"
    assert capacity_unit(Workload()) == "users" and capacity_unit(Workload(mode="open", rate=2.0)) == "req/s"


def test_capacity_on_a_trace_with_a_fixed_speed_is_refused() -> None:
    w = Workload(trace="azure-conv", trace_speed=2.0)
    with pytest.raises(SpecError, match=r"searches the replay speed itself.*drop workload.trace_speed 2"):
        StudySpec(workload=w, objective="capacity", targets=["ttft_p95<5s"]).validate()
    StudySpec(workload=w, targets=["ttft_p95<5s"]).validate()  # another objective replays at 2x
    StudySpec(workload=TRACE, objective="capacity", targets=["ttft_p95<5s"]).validate()
