"""Scoring a measured trial (tuner/trial/scoring.py): relative targets set from the baseline,
one constraint per target plus `server_ran`, the failure kind a broken target gives, and the
reason a person reads. Pure: outcomes and targets built in the test, nothing measured."""

from __future__ import annotations

import math

import pytest

from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.objectives.targets import MAX_MARGIN, parse_target, parse_targets
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.tuner.trial.scoring import NO_BASELINE, describe_miss, infeasible, judge, resolved_targets

THROUGHPUT = [objective("output_throughput")]


def outcome(metrics: dict[str, float] | None, baseline: bool = False) -> TrialOutcome:
    return TrialOutcome(number=1, candidate=Candidate({}), argv=["srv"], env={}, baseline=baseline, metrics=metrics)


# ---- resolved_targets -------------------------------------------------------------------------
def test_absolute_targets_come_back_as_they_are_even_without_a_baseline():
    targets = parse_targets(["ttft<1s", "error_rate<1%"])
    assert resolved_targets(targets, None, outcome({})) == targets


def test_relative_targets_are_set_from_the_baselines_figures():
    targets = parse_targets(["ttft_p95<0.8x", "tpot<50ms"])
    base = outcome({"p95_ttft_ms": 500.0}, baseline=True)
    resolved = resolved_targets(targets, base, outcome({"p95_ttft_ms": 10.0}))
    assert resolved is not None
    assert [t.threshold for t in resolved] == [pytest.approx(400.0), 50.0]


def test_the_baseline_measured_first_is_judged_against_its_own_figures():
    targets = [parse_target("ttft_p95<1.5x")]
    first = outcome({"p95_ttft_ms": 200.0}, baseline=True)
    resolved = resolved_targets(targets, None, first)
    assert resolved is not None and resolved[0].threshold == pytest.approx(300.0)


def test_a_relative_target_with_nothing_to_refer_to_is_none():
    targets = [parse_target("ttft_p95<1.5x")]
    assert resolved_targets(targets, None, outcome({"p95_ttft_ms": 200.0})) is None  # not the baseline
    base_without_figure = outcome({"p95_tpot_ms": 20.0}, baseline=True)
    assert resolved_targets(targets, base_without_figure, outcome({"p95_ttft_ms": 1.0})) is None


# ---- judge ------------------------------------------------------------------------------------
def test_a_met_trial_gets_negative_constraints_objectives_and_no_failure():
    targets = parse_targets(["ttft<1s", "error_rate<1%"])
    o = outcome({"p95_ttft_ms": 500.0, "error_rate": 0.0, "output_throughput": 42.0, "num_requests": 8})
    judge(o, targets, targets, THROUGHPUT)
    assert set(o.constraints) == {"ttft_p95<1000ms", "error_rate<1%", RUNS_KEY}
    assert o.constraints["ttft_p95<1000ms"] == pytest.approx(-0.5) and o.constraints[RUNS_KEY] == -1.0
    assert all(v <= 0 for v in o.constraints.values())
    assert o.objective == 42.0 and o.objectives == [42.0]
    assert o.failure is None and o.reason == ""


def test_two_targets_on_one_metric_stay_two_constraints():
    targets = parse_targets(["ttft_p95<1s", "ttft_p95>100ms"])
    o = outcome({"p95_ttft_ms": 50.0})
    judge(o, targets, targets, THROUGHPUT)
    assert o.constraints["ttft_p95<1000ms"] < 0 < o.constraints["ttft_p95>100ms"]
    assert o.failure is FailureKind.TARGET_MISSED
    assert o.reason == "ttft_p95 50 ms breaks ttft_p95>100ms"


def test_a_missing_or_non_finite_objective_is_none():
    targets = [parse_target("ttft<1s")]
    o = outcome({"p95_ttft_ms": 500.0, "output_throughput": math.nan})
    judge(o, targets, targets, [*THROUGHPUT, objective("ttft_p99")])
    assert o.objective is None and o.objectives == [None, None]


def test_a_broken_error_rate_is_requests_failed_not_target_missed():
    targets = parse_targets(["ttft<1s", "error_rate<1%"])
    o = outcome({"p95_ttft_ms": 500.0, "error_rate": 0.25, "num_requests": 8, "failed": 2})
    judge(o, targets, targets, THROUGHPUT)
    assert o.failure is FailureKind.REQUESTS_FAILED
    assert o.reason == "error_rate 25.0% breaks error_rate<1%"


def test_every_request_failed_is_requests_failed_whatever_target_broke():
    targets = [parse_target("ttft<1s")]
    o = outcome({"num_requests": 4, "failed": 4})  # no TTFT figure at all
    judge(o, targets, targets, THROUGHPUT)
    assert o.failure is FailureKind.REQUESTS_FAILED
    assert o.constraints["ttft_p95<1000ms"] == MAX_MARGIN
    assert o.reason == "ttft_p95 inf (requests failed) breaks ttft<1s"


def test_without_resolved_targets_the_trial_fails_but_keeps_what_it_measured():
    targets = [parse_target("ttft_p95<1.5x")]
    o = outcome({"p95_ttft_ms": 200.0, "output_throughput": 9.0})
    o.objective = 9.0
    judge(o, None, targets, THROUGHPUT)
    assert o.failure is FailureKind.TARGET_MISSED and o.reason == NO_BASELINE
    assert o.metrics == {"p95_ttft_ms": 200.0, "output_throughput": 9.0} and o.objective == 9.0
    assert o.constraints == {"ttft_p95<1.5x": MAX_MARGIN, RUNS_KEY: 1.0}


# ---- infeasible -------------------------------------------------------------------------------
def test_infeasible_violates_every_constraint_and_drops_the_figures():
    targets = parse_targets(["ttft<1s", "error_rate<1%"])
    o = outcome({"p95_ttft_ms": 1.0})
    o.objective = 3.0
    same = infeasible(o, targets, FailureKind.START_FAILED, "exited with status 1")
    assert same is o
    assert o.metrics is None and o.objective is None
    assert o.constraints == {"ttft_p95<1000ms": MAX_MARGIN, "error_rate<1%": MAX_MARGIN, RUNS_KEY: 1.0}
    assert o.failure is FailureKind.START_FAILED and o.reason == "exited with status 1"


# ---- describe_miss ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "metrics", "expected"),
    [
        ("ttft<10s", {"p95_ttft_ms": 11800.0}, "ttft_p95 11800 ms breaks ttft<10s"),
        ("output_throughput>50", {"output_throughput": 12.34}, "output_throughput 12.3 breaks output_throughput>50"),
        ("ttft<1s", {}, "ttft_p95 inf (requests failed) breaks ttft<1s"),
        (
            "error_rate<1%",
            {"error_rate": 0.5, "truncated_requests": 3.0},
            "error_rate 50.0% (3 truncated: answers shorter than max_tokens) breaks error_rate<1%",
        ),
    ],
)
def test_describe_miss_says_the_figure_in_its_unit_and_the_target_as_written(text, metrics, expected):
    assert describe_miss(parse_target(text), metrics) == expected


def test_describe_miss_of_a_target_without_text_describes_it():
    t = parse_target("ttft<1s")
    bare = type(t)(metric=t.metric, stat=t.stat, op=t.op, threshold=t.threshold)
    assert describe_miss(bare, {"p95_ttft_ms": 2000.0}) == "ttft_p95 2000 ms breaks TTFT p95 < 1000 ms"
