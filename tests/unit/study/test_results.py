"""results.json (study/results.py): the best-versus-baseline rows with their noise, how the
ranking held under confirmation, the one payload every reader reads, and its atomic write.
Pure outcomes built in the test; the file goes to the test's own tmp_path."""

from __future__ import annotations

import json
import math

import pytest

from kvtune.kinds import Direction, FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.study.measured_noise import Noise
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import COMPARED, build_payload, choose_best, compare, confirmation_summary, write_results

THROUGHPUT = (objective("output_throughput"),)


def trial(n: int, value: float | None, baseline: bool = False, **fields) -> TrialOutcome:
    feasible = value is not None
    return TrialOutcome(
        number=n,
        candidate=Candidate(flags={} if baseline else {"speed": n}),
        argv=[],
        env={},
        baseline=baseline,
        metrics={"output_throughput": value, "p95_ttft_ms": 100.0} if feasible else None,
        constraints={"x": -1.0 if feasible else 1.0},
        objective=value,
        objectives=[value],
        **fields,
    )


# ---- compare ----------------------------------------------------------------------------------
def test_compare_gives_a_row_per_metric_both_sides_have_and_says_which_way_is_better():
    rows = compare(
        {"output_throughput": 120.0, "p95_ttft_ms": 90.0, "p95_tpot_ms": math.inf},
        {"output_throughput": 100.0, "p95_ttft_ms": 80.0, "p95_tpot_ms": 20.0, "p95_itl_ms": 5.0},
    )
    assert [r["metric"] for r in rows] == ["output_throughput", "p95_ttft_ms"]  # tpot not finite, itl one-sided
    tput, ttft = rows
    assert tput["change_pct"] == pytest.approx(20.0) and tput["better"]  # higher is better
    assert ttft["change_pct"] == pytest.approx(12.5) and not ttft["better"]  # lower is better
    assert "change_pm_pct" not in tput  # no noise given
    assert {key for key, _, _ in COMPARED} >= {r["metric"] for r in rows}


def test_a_multi_turn_study_compares_first_and_later_turns_ttft():
    rows = compare(
        {"median_ttft_ms_turn1": 400.0, "median_ttft_ms_later": 150.0},
        {"median_ttft_ms_turn1": 400.0, "median_ttft_ms_later": 600.0},
    )
    assert [(r["metric"], r["label"]) for r in rows] == [
        ("median_ttft_ms_turn1", "TTFT p50 turn 1 ms"),
        ("median_ttft_ms_later", "TTFT p50 later turns ms"),
    ]
    assert rows[1]["change_pct"] == pytest.approx(-75.0) and rows[1]["better"]


def test_compare_with_noise_gives_the_changes_half_width_and_whether_it_is_within():
    noise = {"output_throughput": Noise(rel_sd=0.05, dof=4)}
    (row,) = compare({"output_throughput": 102.0}, {"output_throughput": 100.0}, noise)
    expected = noise["output_throughput"].t() * 0.05 * math.sqrt(2) * 1.02 * 100
    assert row["change_pm_pct"] == pytest.approx(expected)
    assert row["within_noise"] and row["noise"] == "pooled noise 5.0%, 4 dof"


def test_a_zero_baseline_gives_no_percentage_and_no_noise_band():
    (row,) = compare({"output_throughput": 5.0}, {"output_throughput": 0.0}, {"output_throughput": Noise(0.05, 4)})
    assert math.isnan(row["change_pct"]) and "change_pm_pct" not in row


# ---- confirmation_summary (moved from tests/unit/tuner/test_loop.py) ----------------------------
def test_confirmation_summary_counts_the_baseline():
    """The demo's case: trial 5 beat the baseline by noise; re-measured, the baseline leads."""

    def o(n, value, again, baseline=False):
        t = trial(n, value, baseline=baseline)
        t.confirmation = {"objective": again, "feasible": True}
        return t

    outcomes = [o(0, 81.5, 79.5, baseline=True), o(5, 83.6, 76.5)]
    summary = confirmation_summary(outcomes, Direction.MAXIMIZE)
    assert summary is not None
    assert summary["order_before"] == [5, 0] and summary["order_after"] == [0, 5]
    assert not summary["held"]
    # the re-measurements name nothing without the verdict: the search's top, said to be unproven
    assert choose_best(outcomes, THROUGHPUT).best.number == 5
    assert choose_best(outcomes, THROUGHPUT).naming.why.startswith("not confirmed")


def test_without_a_confirmation_there_is_no_summary():
    assert confirmation_summary([trial(0, 10.0, baseline=True), trial(1, 12.0)], Direction.MAXIMIZE) is None


def test_a_config_that_is_no_longer_feasible_when_re_measured_breaks_the_hold():
    a, b = trial(1, 12.0), trial(2, 10.0)
    a.confirmation = {"objective": 12.0, "feasible": False}
    b.confirmation = {"objective": 10.0, "feasible": True}
    summary = confirmation_summary([a, b], Direction.MAXIMIZE)
    assert summary is not None
    assert summary["no_longer_feasible"] == [1] and summary["remeasured"] == [1, 2] and not summary["held"]


# ---- build_payload ----------------------------------------------------------------------------
def test_the_payload_names_the_baseline_the_best_and_compares_them():
    outcomes = [
        trial(0, 100.0, baseline=True),
        trial(1, 150.0),
        trial(2, None, failure=FailureKind.PRE_SCREEN, reason="too small"),
    ]
    payload = build_payload("s", {"study": "s"}, {"cpu": "x"}, "fake 1.0", ["ttft<1s"], THROUGHPUT, outcomes)
    assert (payload["study"], payload["backend_version"], payload["targets"]) == ("s", "fake 1.0", ["ttft<1s"])
    assert payload["direction"] == "maximize"
    assert payload["baseline_trial"] == 0 and payload["best_trial"] == 1
    assert payload["launches_saved_by_prescreen"] == 1
    assert [t["number"] for t in payload["trials"]] == [0, 1, 2]
    assert [TrialOutcome.from_dict(t).number for t in payload["trials"]] == [0, 1, 2]  # read back
    assert payload["importance"] == {"skipped": "not computed"} and payload["confirmation"] is None
    row = next(r for r in payload["best_vs_baseline"] if r["metric"] == "output_throughput")
    assert row["change_pct"] == pytest.approx(50.0)
    assert payload["best_vs_baseline_measurements"] == 1
    assert "objective" in payload["noise"] and "pareto_trials" not in payload


def test_a_study_without_a_measured_baseline_has_no_comparison():
    payload = build_payload("s", {}, {}, "v", [], THROUGHPUT, [trial(1, 10.0)])
    assert payload["baseline_trial"] is None and payload["best_trial"] == 1
    assert "best_vs_baseline" not in payload


def test_a_multi_objective_payload_lists_the_directions_and_the_pareto_set():
    objectives = (objective("output_throughput"), objective("ttft_p95"))

    def two(n: int, tput: float, ttft: float, again: bool = True) -> TrialOutcome:
        t = trial(n, tput)
        t.objectives = [tput, ttft]
        if again:  # re-measured: the Pareto set is built from fresh runs alone
            t.confirmation = {"objective": tput, "objectives": [tput, ttft], "feasible": True}
        return t

    outcomes = [two(0, 100.0, 50.0), two(1, 120.0, 40.0), two(2, 130.0, 90.0), two(3, 200.0, 10.0, again=False)]
    payload = build_payload("mo", {}, {}, "v", [], objectives, outcomes, importance={"speed": 1.0})
    assert payload["directions"] == ["maximize", "minimize"]
    assert sorted(payload["pareto_trials"]) == [1, 2]  # 0 is beaten by 1; 3 was never re-measured
    assert payload["importance"] == {"speed": 1.0}


# ---- write_results ----------------------------------------------------------------------------
def test_write_results_replaces_the_file_whole_and_writes_standard_json(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    assert write_results(path, {"p99": math.inf, "trials": [1]}) == path
    assert json.loads(path.read_text()) == {"p99": None, "trials": [1]}  # +inf: null, standard JSON
    assert not path.with_suffix(".tmp").exists()
