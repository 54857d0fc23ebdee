"""One level of the capacity search (tuner/trial/capacity.py): the workload a level is measured
with (warm-up at that level, waves of users, an open-loop duration that does not shrink with the
rate, users sized by Little's law), the ramp, and a typical request's duration. Pure."""

from __future__ import annotations

import pytest

from kvtune.tuner.trial.capacity import (
    MAX_CONCURRENCY,
    CapacityPlan,
    LevelStatus,
    is_open,
    level_workload,
    ramp_for,
    typical_duration_s,
)
from kvtune.workload import Workload

CLOSED = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=3)
OPEN = Workload(mode="open", rate=1.0, concurrency=2, num_requests=32, warmup_requests=2)


def test_a_closed_level_runs_its_users_for_several_waves_after_a_warm_up():
    plan = CapacityPlan()
    w = level_workload(CLOSED, 6, plan, first=False, typical_s=0.5)
    assert w.concurrency == 6
    assert w.warmup_requests == plan.warmup_waves * 6
    assert w.num_requests == plan.waves * 6  # more than the workload's own 8
    assert (w.prompt_tokens, w.output_tokens, w.mode) == (CLOSED.prompt_tokens, CLOSED.output_tokens, "closed")


def test_a_closed_level_never_measures_fewer_requests_than_the_workload_asks():
    w = level_workload(CLOSED, 1, CapacityPlan(), first=False, typical_s=0.0)
    assert w.num_requests == CLOSED.num_requests and w.warmup_requests == 1


def test_only_the_first_level_keeps_the_workloads_own_warm_up():
    first = level_workload(CLOSED, 1, CapacityPlan(), first=True, typical_s=0.0)
    later = level_workload(CLOSED, 1, CapacityPlan(), first=False, typical_s=0.0)
    assert first.warmup_requests == CLOSED.warmup_requests and later.warmup_requests == 1


def test_an_open_level_runs_for_a_duration_so_a_higher_rate_is_not_a_shorter_run():
    plan = CapacityPlan(min_open_duration_s=20.0)
    slow = level_workload(OPEN, 0.5, plan, first=False, typical_s=0.0)
    fast = level_workload(OPEN, 8.0, plan, first=False, typical_s=0.0)
    assert slow.duration_s == 64.0  # num_requests / rate
    assert fast.duration_s == 20.0  # the floor: 32 / 8 = 4 s would end before queues build
    assert fast.rate == 8.0 and fast.mode == "open"


def test_an_open_level_keeps_as_many_users_as_the_rate_needs():
    w = level_workload(OPEN, 8.0, CapacityPlan(), first=False, typical_s=0.75)
    assert w.concurrency == 6  # ceil(8 req/s x 0.75 s)
    assert w.warmup_requests == 6
    capped = level_workload(OPEN, 1000.0, CapacityPlan(), first=False, typical_s=10.0)
    assert capped.concurrency == MAX_CONCURRENCY
    tiny = level_workload(OPEN, 0.1, CapacityPlan(), first=False, typical_s=0.1)
    assert tiny.concurrency == 1


def test_level_workload_keeps_a_workload_duration():
    w = level_workload(Workload(mode="open", rate=1.0, duration_s=5.0), 4.0, CapacityPlan(), first=False, typical_s=0.0)
    assert w.duration_s == 5.0 and w.rate == 4.0 and w.concurrency == 8  # no typical: as asked


def test_the_level_does_not_change_the_workload_it_was_given():
    level_workload(CLOSED, 6, CapacityPlan(), first=False, typical_s=0.5)
    assert CLOSED.concurrency == 2 and CLOSED.num_requests == 8


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"mean_e2el_ms": 1500.0}, 1.5),
        ({"mean_e2el_ms": float("nan")}, 0.0),
        ({"mean_e2el_ms": 0.0}, 0.0),
        ({"mean_e2el_ms": -5.0}, 0.0),
        ({}, 0.0),
        (None, 0.0),
    ],
)
def test_typical_duration(metrics, expected) -> None:
    assert typical_duration_s(metrics) == expected


def test_users_ramp_in_over_one_typical_request_unless_the_plan_says_not():
    assert ramp_for(CapacityPlan(), 1.25) == 1.25
    assert ramp_for(CapacityPlan(ramp=False), 1.25) == 0.0


def test_is_open_and_the_verdicts_results_json_records():
    assert is_open(OPEN) and not is_open(CLOSED)
    assert [s.value for s in LevelStatus] == ["held", "broke", "client-limited"]
