"""The study overview: best, baseline, Pareto set, failures by reason, and pick_trial.

Fixtures are real results.json files from small llama-server studies (data/): results_small
(4 trials, all feasible) and results_misses (12 trials against ttft<700ms: 8 misses, 1 duplicate).
"""

import copy
import json
from pathlib import Path

import pytest

from kvtune.artifacts import overview as ov
from kvtune.errors import SpecError

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict:
    return json.loads((DATA / f"results_{name}.json").read_text())


def failing(results: dict, number: int, reason: str, constraints: dict, metrics: bool = False) -> dict:
    t = copy.deepcopy(results["trials"][1])
    t.update(number=number, reason=reason, feasible=False, duplicate_of=None, baseline=False,
             constraints=constraints)
    if not metrics:
        t.update(metrics=None, objective=None)
    return t


def test_small_study_overview():
    r = load("small")
    o = ov.overview(r)
    assert o["best"]["number"] == 3 and o["baseline"]["number"] == 0
    assert [t["number"] for t in o["pareto"]] == [3]
    assert o["failures"] == []
    assert o["counts"] == {"trials": 4, "measured": 4, "feasible": 4, "duplicates": 0, "infeasible": 0,
                           "launches_saved_by_prescreen": 0}
    assert [row["metric"] for row in o["best_vs_baseline"]][0] == "output_throughput"


def test_target_misses_group_by_target_and_duplicates_are_skipped():
    r = load("misses")
    o = ov.overview(r)
    assert o["best"]["number"] == 5
    assert o["failures"] == [{"category": "missed target ttft_p95", "count": 8,
                              "trials": [0, 1, 2, 4, 7, 8, 9, 10],
                              "example": r["trials"][0]["reason"]}]
    assert o["counts"]["duplicates"] == 1 and o["counts"]["feasible"] == 3
    assert 11 not in [t["number"] for t in o["pareto"]]  # trial 11 replays trial 6


def test_pareto_front_is_exactly_the_non_dominated_feasible_measured_trials():
    r = load("misses")
    front = ov.pareto(r)
    pts = [t for t in r["trials"] if t["feasible"] and t["duplicate_of"] is None and t["metrics"]]

    def dominates(a, b):
        ax, ay = a["metrics"]["p95_ttft_ms"], a["metrics"]["output_throughput"]
        bx, by = b["metrics"]["p95_ttft_ms"], b["metrics"]["output_throughput"]
        return ax <= bx and ay >= by and (ax < bx or ay > by)

    expected = {t["number"] for t in pts if not any(dominates(o, t) for o in pts)}
    assert {t["number"] for t in front} == expected
    xs = [t["metrics"]["p95_ttft_ms"] for t in front]
    assert xs == sorted(xs)


def test_pareto_on_a_constructed_set():
    base = load("small")
    proto = base["trials"][1]

    def trial(n, ttft, thr, feasible=True, dup=None):
        t = copy.deepcopy(proto)
        t.update(number=n, feasible=feasible, duplicate_of=dup)
        t["metrics"] = {"p95_ttft_ms": ttft, "output_throughput": thr}
        return t

    r = {"trials": [trial(0, 100, 10), trial(1, 200, 20), trial(2, 150, 5), trial(3, 200, 20),
                    trial(4, 50, 50, feasible=False), trial(5, 10, 99, dup=1), trial(6, 300, 30)]}
    assert [t["number"] for t in ov.pareto(r)] == [0, 1, 3, 6]


def test_failure_reasons_are_normalized():
    r = load("small")
    launch = {"ttft_p95": 1e6, "error_rate": 1e6, "server_ran": 1.0}
    r["trials"] += [
        failing(r, 4, "pre-screen: per-slot context 256 < request length 300", launch),
        failing(r, 5, "server failed to start: error: invalid argument: --bogus", launch),
        failing(r, 6, "server failed to start: exited with status 1", launch),
        failing(r, 7, "server start timed out: no /health after 180 s", launch),
        failing(r, 8, "server crashed during the benchmark (status -9): killed", launch, metrics=True),
        failing(r, 9, "ttft_p95 900 ms breaks ttft<700ms; error_rate 5.0% breaks error_rate<1%",
                {"ttft_p95": 0.3, "error_rate": 4.0, "server_ran": -1.0}, metrics=True),
        failing(r, 10, "something new: details", {"server_ran": 1.0}),
    ]
    dup = failing(r, 11, "server failed to start: exited with status 1", launch)
    dup["duplicate_of"] = 6
    r["trials"].append(dup)
    groups = {g["category"]: g["trials"] for g in ov.failures(r)}
    assert groups == {"server failed to start": [5, 6], "pre-screen": [4], "server start timed out": [7],
                      "server crashed during the benchmark": [8], "missed target ttft_p95": [9],
                      "missed target error_rate": [9], "something new": [10]}
    assert ov.failures(r)[0]["category"] == "server failed to start"  # largest group first


def test_best_is_computed_when_results_do_not_name_it():
    r = load("misses")
    del r["best_trial"]
    assert ov.best_trial(r)["number"] == 5
    r["direction"] = "minimize"
    assert ov.best_trial(r)["number"] == 3  # lowest output throughput among the feasible ones


def test_pick_trial():
    r = load("misses")
    assert ov.pick_trial(r)["number"] == 5
    assert ov.pick_trial(r, 6)["number"] == 6
    assert ov.pick_trial(r, 11)["number"] == 6  # a duplicate resolves to the trial it replayed
    with pytest.raises(SpecError, match=r"no trial 42 \(trials 0-11\); feasible trials: 3, 5, 6") as e:
        ov.pick_trial(r, 42)
    assert "\n" not in str(e.value)
    with pytest.raises(SpecError, match=r"trial 2 of study demo12 is not feasible \(ttft_p95 4648 ms"):
        ov.pick_trial(r, 2)


def test_pick_trial_without_any_feasible_trial():
    r = load("small")
    for t in r["trials"]:
        t.update(feasible=False, metrics=None, objective=None, reason="server failed to start: x")
    r["best_trial"] = None
    with pytest.raises(SpecError, match="no feasible trial to export yet"):
        ov.pick_trial(r)
    with pytest.raises(SpecError, match="not feasible .*no trial is feasible yet"):
        ov.pick_trial(r, 0)
