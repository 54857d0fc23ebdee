"""The one trial outcome: its JSON round trip and the reading of results written before the
failure kind was recorded."""

import json

import pytest

from kvtune.jsonsafe import dumps
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.study.outcome import RUNS_KEY, TrialOutcome


def outcome(**kw) -> TrialOutcome:
    base = dict(
        number=3,
        candidate=Candidate(flags={"parallel": 4}),
        argv=["srv", "--parallel", "4"],
        env={"A": "1"},
        launched=True,
        metrics={"output_throughput": 12.5, "p99_ttft_ms": float("inf")},
        constraints={"ttft_p95<1000ms": 0.5, RUNS_KEY: -1.0},
        failure=FailureKind.TARGET_MISSED,
        reason="ttft_p95 1500 ms breaks ttft<1s",
        objective=12.5,
        objectives=[12.5],
    )
    return TrialOutcome(**{**base, **kw})


def test_round_trip_through_results_json_keeps_the_kind():
    o = outcome()
    d = json.loads(dumps(o))  # what results.json and the Optuna user attrs hold
    assert d["failure"] == "target missed" and d["feasible"] is False
    assert d["metrics"]["p99_ttft_ms"] is None  # standard JSON: inf became null
    back = TrialOutcome.from_dict(d)
    assert back.failure is FailureKind.TARGET_MISSED
    assert back.candidate == o.candidate and back.argv == o.argv and back.constraints == o.constraints
    assert not back.feasible and back.measured


def test_a_feasible_outcome_has_no_kind():
    d = json.loads(dumps(outcome(constraints={"ttft_p95<1000ms": -0.5, RUNS_KEY: -1.0}, failure=None, reason="")))
    back = TrialOutcome.from_dict(d)
    assert back.feasible and back.failure is None


LAUNCH = {"ttft_p95": 1e6, "error_rate": 1e6, RUNS_KEY: 1.0}


@pytest.mark.parametrize(
    "reason,constraints,kind",
    [
        ("pre-screen: per-slot context 256 < request length 300", LAUNCH, FailureKind.PRE_SCREEN),
        ("server failed to start: exited with status 1", LAUNCH, FailureKind.START_FAILED),
        ("server start timed out: no /health after 180 s", LAUNCH, FailureKind.START_TIMEOUT),
        ("port busy: port 8080 is already in use", LAUNCH, FailureKind.PORT_BUSY),
        ("server crashed during the benchmark (status -9): killed", LAUNCH, FailureKind.CRASHED),
        (
            "ttft_p95 900 ms breaks ttft<700ms",
            {"ttft_p95": 0.3, "error_rate": -1.0, RUNS_KEY: -1.0},
            FailureKind.TARGET_MISSED,
        ),
        (
            "ttft_p95 900 ms breaks ttft<700ms; error_rate 5.0% breaks error_rate<1%",
            {"ttft_p95": 0.3, "error_rate": 4.0, RUNS_KEY: -1.0},
            FailureKind.REQUESTS_FAILED,
        ),
        ("", {"ttft_p95": -0.3, "error_rate": -1.0, RUNS_KEY: -1.0}, None),
        ("something new: details", {RUNS_KEY: 1.0}, None),
    ],
)
def test_legacy_records_without_a_kind_get_one_from_their_reason(reason, constraints, kind):
    d = json.loads(dumps(outcome(constraints=constraints, reason=reason)))
    del d["failure"]  # written before the kind was recorded
    assert TrialOutcome.from_dict(d).failure is kind


def test_a_recorded_kind_is_never_second_guessed_from_the_reason():
    d = json.loads(dumps(outcome(failure=FailureKind.CRASHED, reason="pre-screen: looks like one", constraints=LAUNCH)))
    assert TrialOutcome.from_dict(d).failure is FailureKind.CRASHED


def test_the_first_measurement_is_what_the_search_saw_and_fresh_figures_are_apart():
    """Issue 37: nothing averages the first measurement (biased up for a config the search chose)
    with the re-measurements: the fresh figures are their own mean alone."""
    o = outcome(failure=None, reason="", constraints={RUNS_KEY: -1.0}, objective=20.0, objectives=[20.0, 300.0])
    assert o.fresh_objective is None and o.fresh_objectives == [] and o.held
    o.confirmation = {"objective": 14.0, "objectives": [14.0, 420.0], "feasible": True, "valid_runs": 2}
    assert (o.objective, o.objectives) == (20.0, [20.0, 300.0])
    assert o.fresh_objective == 14.0 and o.fresh_objectives == [14.0, 420.0]
    o.confirmation["no_valid_run"] = True  # every re-measurement disturbed: no fresh figure
    assert o.fresh_objective is None and o.fresh_objectives == []


def test_held_is_the_verdicts_own_target_checks_for_the_trial_it_tested():
    o = outcome(failure=None, reason="", constraints={RUNS_KEY: -1.0})
    o.confirmation = {"objective": 12.0, "objectives": [12.0], "feasible": True}
    missed = {"who": "candidate", "shown": "missed", "target": "ttft<1s"}
    o.verdict = {"candidate": 3, "baseline": 0, "targets": [missed, {"who": "defaults", "shown": "met"}]}
    assert not o.held and o.evidence == "re-measured, did not hold"
    o.verdict["targets"][0]["shown"] = "unclear"  # not shown either way: not a failure
    o.confirmation["feasible"] = False  # the record's judgement yields to the verdict's checks
    assert o.held
    o.verdict = {"candidate": 5, "baseline": 0, "targets": [missed]}  # another trial was tested
    assert not o.held  # the record's judgement (the verdict's tests on this trial's fresh runs)
