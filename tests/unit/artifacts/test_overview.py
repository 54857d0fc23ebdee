"""The study overview: best, baseline, Pareto set, failures by kind, and pick_trial.

Fixtures are real results.json files from small llama-server studies (data/), written before
the failure kind was recorded: results_small (4 trials, all feasible) and results_misses (12 trials
against ttft<700ms: 8 misses, 1 duplicate). A multi-objective study run with the fake launcher
checks that `kvtune show` names the very Pareto set the tuner does.

The tests here start no process; those that do are in tests/integration/artifacts/test_overview.py.
"""

import copy
import json

import pytest

from kvtune.artifacts import overview as ov
from kvtune.errors import SpecError
from kvtune.jsonsafe import dumps
from kvtune.kinds import FailureKind
from kvtune.study.outcome import RUNS_KEY
from kvtune.study.ranking import pareto
from kvtune.study.results import build_payload
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
LAUNCH = {"ttft_p95": 1e6, "error_rate": 1e6, RUNS_KEY: 1.0}


def load(name: str) -> dict:
    return json.loads((DATA / f"results_{name}.json").read_text())


def failing(
    results: dict,
    number: int,
    reason: str,
    constraints: dict,
    metrics: bool = False,
    failure: FailureKind | None = None,
) -> dict:
    t = copy.deepcopy(results["trials"][1])
    t.update(number=number, reason=reason, feasible=False, duplicate_of=None, baseline=False, constraints=constraints)
    if failure is not None:
        t["failure"] = failure.value
    if not metrics:
        t.update(metrics=None, objective=None)
    return t


def test_small_study_overview():
    r = load("small")
    o = ov.overview(r)
    assert o["best"].number == 3 and o["baseline"].number == 0
    assert [t.number for t in o["pareto"]] == [3] and o["pareto_is_trade_off"]
    assert o["failures"] == []
    assert o["counts"] == {
        "trials": 4,
        "measured": 4,
        "feasible": 4,
        "not_held": 0,
        "duplicates": 0,
        "infeasible": 0,
        "launches_saved_by_prescreen": 0,
    }
    assert [row["metric"] for row in o["best_vs_baseline"]][0] == "output_throughput"


def test_target_misses_group_by_target_and_duplicates_are_skipped():
    r = load("misses")
    o = ov.overview(r)
    assert o["best"].number == 5
    assert o["failures"] == [
        {
            "category": "missed target ttft_p95",
            "count": 8,
            "trials": [0, 1, 2, 4, 7, 8, 9, 10],
            "example": r["trials"][0]["reason"],
        }
    ]
    assert o["counts"]["duplicates"] == 1 and o["counts"]["feasible"] == 3
    assert 11 not in [t.number for t in o["pareto"]]  # trial 11 replays trial 6


def test_trade_off_view_is_exactly_the_non_dominated_feasible_measured_trials():
    r = load("misses")
    front = ov.study_front(r)
    pts = [t for t in r["trials"] if t["feasible"] and t["duplicate_of"] is None and t["metrics"]]

    def dominates(a, b):
        ax, ay = a["metrics"]["p95_ttft_ms"], a["metrics"]["output_throughput"]
        bx, by = b["metrics"]["p95_ttft_ms"], b["metrics"]["output_throughput"]
        return ax <= bx and ay >= by and (ax < bx or ay > by)

    expected = {t["number"] for t in pts if not any(dominates(o, t) for o in pts)}
    assert {t.number for t in front} == expected
    xs = [t.metrics["p95_ttft_ms"] for t in front]
    assert xs == sorted(xs)


def test_trade_off_view_on_a_constructed_set():
    base = load("small")
    proto = base["trials"][1]

    def trial(n, ttft, thr, feasible=True, dup=None):
        t = copy.deepcopy(proto)
        t.update(number=n, duplicate_of=dup, constraints={RUNS_KEY: -1.0 if feasible else 1.0})
        t["metrics"] = {"p95_ttft_ms": ttft, "output_throughput": thr}
        return t

    r = {
        "trials": [
            trial(0, 100, 10),
            trial(1, 200, 20),
            trial(2, 150, 5),
            trial(3, 200, 20),
            trial(4, 50, 50, feasible=False),
            trial(5, 10, 99, dup=1),
            trial(6, 300, 30),
        ]
    }
    assert [t.number for t in ov.study_front(r)] == [0, 1, 3, 6]


def test_legacy_failure_reasons_are_read_into_kinds():
    r = load("small")
    r["trials"] += [
        failing(r, 4, "pre-screen: per-slot context 256 < request length 300", LAUNCH),
        failing(r, 5, "server failed to start: error: invalid argument: --bogus", LAUNCH),
        failing(r, 6, "server failed to start: exited with status 1", LAUNCH),
        failing(r, 7, "server start timed out: no /health after 180 s", LAUNCH),
        failing(r, 8, "server crashed during the benchmark (status -9): killed", LAUNCH, metrics=True),
        failing(
            r,
            9,
            "ttft_p95 900 ms breaks ttft<700ms; error_rate 5.0% breaks error_rate<1%",
            {"ttft_p95": 0.3, "error_rate": 4.0, RUNS_KEY: -1.0},
            metrics=True,
        ),
        failing(r, 10, "something new: details", {RUNS_KEY: 1.0}),
    ]
    dup = failing(r, 11, "server failed to start: exited with status 1", LAUNCH)
    dup["duplicate_of"] = 6
    r["trials"].append(dup)
    groups = {g["category"]: g["trials"] for g in ov.failures(r)}
    assert groups == {
        "server failed to start": [5, 6],
        "pre-screen": [4],
        "server start timed out": [7],
        "server crashed during the benchmark": [8],
        "requests failed": [9],
        ov.NO_KIND: [10],
    }
    assert ov.failures(r)[0]["category"] == "server failed to start"  # largest group first


def test_failures_group_by_the_recorded_kind_not_the_reason_text():
    r = load("small")
    miss = {"output_throughput>50": 0.2, "output_throughput<500": -0.5, "error_rate<1%": -1.0, RUNS_KEY: -1.0}
    r["trials"] += [
        failing(r, 4, "anything at all", LAUNCH, failure=FailureKind.PORT_BUSY),
        failing(r, 5, "pre-screen: but it crashed", LAUNCH, metrics=True, failure=FailureKind.CRASHED),
        failing(
            r,
            6,
            "output_throughput 40.0 breaks output_throughput>50",
            miss,
            metrics=True,
            failure=FailureKind.TARGET_MISSED,
        ),
        failing(
            r,
            7,
            "error_rate 100.0% breaks error_rate<1%",
            {**miss, "error_rate<1%": 99.0},
            metrics=True,
            failure=FailureKind.REQUESTS_FAILED,
        ),
    ]
    r["launches_saved_by_prescreen"] = 0
    groups = {g["category"]: g["trials"] for g in ov.failures(r)}
    assert groups == {
        "port busy": [4],
        "server crashed during the benchmark": [5],
        "missed target output_throughput>50": [6],
        "requests failed": [7],
    }


def test_best_is_ranked_as_the_tuner_ranks_when_results_do_not_name_it():
    r = load("misses")
    del r["best_trial"]
    assert ov.best_trial(r).number == 5
    r["spec"]["objective"] = "ttft_p95"  # a minimizing objective: the lowest value wins
    assert ov.best_trial(r).number == 3  # lowest objective value among the feasible ones


def test_pick_trial():
    r = load("misses")
    assert ov.pick_trial(r).number == 5
    assert ov.pick_trial(r, 6).number == 6
    assert ov.pick_trial(r, 11).number == 6  # a duplicate resolves to the trial it replayed
    with pytest.raises(SpecError, match=r"no trial 42 \(trials 0-11\); feasible trials: 3, 5, 6") as e:
        ov.pick_trial(r, 42)
    assert "\n" not in str(e.value)
    with pytest.raises(SpecError, match=r"trial 2 of study demo12 is not feasible \(ttft_p95 4648 ms"):
        ov.pick_trial(r, 2)


def test_pick_trial_without_any_feasible_trial():
    r = load("small")
    for t in r["trials"]:
        t.update(
            feasible=False, metrics=None, objective=None, reason="server failed to start: x", constraints=dict(LAUNCH)
        )
    r["best_trial"] = None
    with pytest.raises(SpecError, match="no feasible trial to export yet"):
        ov.pick_trial(r)
    with pytest.raises(SpecError, match="not feasible .*no trial is feasible yet"):
        ov.pick_trial(r, 0)


def test_show_pareto_is_over_the_study_objectives_not_throughput_against_ttft():
    """Objectives output_throughput and ttft_p99: trial 0 is beaten on both by trial 1, though on
    TTFT p95 (the single-objective trade-off view) it is not."""
    from kvtune.knobs import Candidate
    from kvtune.objectives.objective import objective
    from kvtune.study.outcome import TrialOutcome

    objs = (objective("output_throughput"), objective("ttft_p99"))
    rows = {0: (10.0, 100.0, 1000.0), 1: (20.0, 200.0, 150.0), 2: (5.0, 50.0, 100.0)}
    outcomes = [
        TrialOutcome(
            number=n,
            candidate=Candidate(flags={"p": n}),
            argv=["srv"],
            env={},
            metrics={"output_throughput": thr, "p95_ttft_ms": p95, "p99_ttft_ms": p99},
            constraints={RUNS_KEY: -1.0},
            objective=thr,
            objectives=[thr, p99],
            # re-measured alike: the reported Pareto set is built from fresh runs alone
            confirmation={"objective": thr, "objectives": [thr, p99], "feasible": True},
        )
        for n, (thr, p95, p99) in rows.items()
    ]
    spec = {"objective": [o.name for o in objs], "targets": []}
    payload = json.loads(dumps(build_payload("mo", spec, {}, "fake", [], objs, outcomes)))
    shown = ov.overview(payload)
    assert [o.number for o in shown["pareto"]] == [o.number for o in pareto(outcomes, [o.direction for o in objs])]
    assert [o.number for o in shown["pareto"]] == [1, 2] == payload["pareto_trials"]
    single = dict(payload, spec={"objective": "output_throughput"})
    assert [o.number for o in ov.overview(single)["pareto"]] == [2, 0, 1]  # the trade-off view
