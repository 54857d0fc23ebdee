"""Issue 22 §1, §4, §5, issue 37: the named best (the verdict's, else the search's top, said to be
not confirmed), its figures and its noise, from constructed outcomes."""

from __future__ import annotations

import json
import math

import pytest

from kvtune.jsonsafe import dumps
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.study.measured_noise import OBJECTIVE, measurements, noise_of
from kvtune.study.naming import (
    FIRST,
    FIRST_SELECTED,
    NOT_CONFIRMED,
    REMEASURED,
    comparison_basis,
    comparison_metrics,
    figure,
    headline,
    name_best,
)
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import build_payload, study_naming
from kvtune.verdict import DecisionKind, Verdict

DEFAULTS = {"batch-size": 2048, "ubatch-size": 512}


def outcome(
    number: int, values: list[float], flags: dict | None = None, baseline: bool = False, held: bool = True
) -> TrialOutcome:
    o = TrialOutcome(
        number=number,
        candidate=Candidate(flags=flags or {}),
        argv=["srv"],
        env={},
        baseline=baseline,
        metrics={"output_throughput": values[0]},
        constraints={"server_ran": -1.0},
        objective=values[0],
        objectives=[values[0]],
    )
    if len(values) > 1:
        o.confirmation = {
            "metrics": {"output_throughput": values[1]},
            "objective": values[1],
            "objectives": [values[1]],
            "feasible": held,
            "reason": "" if held else "missed target ttft<1s",
        }
    return o


def tied_study() -> list[TrialOutcome]:
    """Trials 1 and 2 within the measured noise of each other, both well above the defaults;
    trial 1 gives 3 flags but changes only 1 from the defaults, trial 2 gives 2 and changes both."""
    return [
        outcome(0, [100.0, 99.0], baseline=True),
        outcome(1, [130.0, 128.0], {"batch-size": 2048, "ubatch-size": 512, "threads": 2}),
        outcome(2, [131.0, 129.5], {"threads": 2, "parallel": 4}),
    ]


def test_without_a_verdict_the_searchs_top_is_named_and_said_to_be_not_confirmed():
    """No second standard of proof: without the verdict nothing compares re-measurements under
    the pooled noise; the search's top that held is named, and the reason says it is unproven."""
    outs = tied_study()
    named = name_best(outs, "maximize")
    assert named.best.number == 2 and named.why == NOT_CONFIRMED and named.tied_with == []
    assert named.verdict is None and not named.remeasured and "pooled noise" not in named.why
    outs[2].confirmation["feasible"] = False  # shown to fail on fresh servers: no longer a candidate
    assert name_best(outs, "maximize").best.number == 1


def test_results_json_carries_what_readers_need_to_name_the_same_best():
    from kvtune.artifacts.overview import best_trial

    outs = tied_study()
    payload = json.loads(
        dumps(
            build_payload(
                "s",
                {"objective": "output_throughput"},
                {},
                "v",
                [],
                (objective("output_throughput"),),
                outs,
                server_defaults=DEFAULTS,
            )
        )
    )
    assert payload["best_trial"] == 2 and payload["server_defaults"] == DEFAULTS
    block = payload["noise"][OBJECTIVE]
    assert block["dof"] == 3 and block["measured"] and block["configs"] == [0, 1, 2]
    assert block["source"].startswith("pooled noise") and block["inconsistent"] == []
    assert payload["noise"]["output_throughput"]["dof"] == 3
    del payload["best_trial"]  # a reader without the field names as the run did
    assert best_trial(payload).number == 2


def test_the_demo_baseline_pair_is_reported_inconsistent_and_not_pooled():
    outs = [
        outcome(0, [14.94, 48.1], baseline=True),
        outcome(4, [49.0, 47.3], {"threads": 2}),
        outcome(5, [48.0, 46.9], {"threads": 1}),
    ]
    payload = build_payload("busy", {}, {}, "v", [], (objective("output_throughput"),), outs)
    block = payload["noise"][OBJECTIVE]
    assert [p["trial"] for p in block["inconsistent"]] == [0] and block["configs"] == [4, 5]


def test_figures_say_which_measurement_they_are():
    noise = noise_of(tied_study())
    best = outcome(3, [150.0, 120.0], {"threads": 2})
    f = figure(best, noise)
    assert f.label == REMEASURED and f.mean == 120.0 and f.first == 150.0 and f.n == 1
    assert "search measurement 150 (selected, biased up)" in f.text() and "pooled noise" in f.text()
    once = figure(outcome(4, [140.0], {"threads": 1}), noise)
    assert once.label == FIRST_SELECTED and once.first is None
    assert figure(outcome(0, [100.0], baseline=True), noise).label == FIRST  # the baseline is never selected
    assert headline(TrialOutcome(9, Candidate(), [], {})) == "-"


def test_a_single_measurement_says_measured_once_only_once():
    # issue 22 §6: "(measured once) (measured once)"; the figure no longer says it, the evidence does
    text = headline(outcome(4, [140.0], {"threads": 1}))
    assert "measured once" not in text and "prior 10%, not measured" in text


def test_best_vs_baseline_compares_the_re_measurements_of_both():
    base = outcome(0, [20.03, 44.51], baseline=True)
    best = outcome(1, [49.0, 50.19], {"threads": 2})
    best_m, base_m, n = comparison_metrics(best, base)
    assert n == 1 and best_m["output_throughput"] == 50.19 and base_m["output_throughput"] == 44.51
    assert comparison_basis(best, base).startswith("re-measured")
    once = outcome(2, [60.0], {"threads": 1})
    best_m, base_m, _ = comparison_metrics(once, base)
    assert (best_m["output_throughput"], base_m["output_throughput"]) == (60.0, 20.03)
    assert "biased up" in comparison_basis(once, base)


def test_best_vs_baseline_rows_carry_the_measured_plus_minus():
    outs = [outcome(0, [100.0, 98.0], baseline=True), outcome(1, [140.0, 138.0], {"threads": 2})]
    payload = build_payload("s", {}, {}, "v", [], (objective("output_throughput"),), outs)
    row = next(r for r in payload["best_vs_baseline"] if r["metric"] == "output_throughput")
    n = noise_of(outs, "output_throughput")
    assert row["change_pct"] == pytest.approx((138 / 98 - 1) * 100)
    assert row["change_pm_pct"] == pytest.approx(n.t() * n.rel_sd * math.sqrt(2) * 138 / 98 * 100)
    assert row["noise"] == n.source() and row["within_noise"] is False
    assert payload["best_vs_baseline_evidence"].startswith("re-measured")


def test_measurements_and_repeat_spreads_feed_the_noise():
    o = outcome(1, [100.0, 110.0], {"threads": 2})
    assert measurements(o, OBJECTIVE) == [100.0, 110.0] and measurements(o, "p95_ttft_ms") == []
    o.metrics["repeats"] = 3.0
    o.spread = {"output_throughput": 0.04}
    noise = noise_of([o], OBJECTIVE, "output_throughput")
    assert noise.dof == 1 + 2  # one re-measurement plus three runs on one server
    dup = outcome(2, [100.0, 200.0], {"threads": 2})
    dup.duplicate_of = 1
    assert noise_of([dup]).dof == 0  # a replay is no repeat


def test_a_figure_of_several_fresh_runs_is_their_mean_alone():
    o = outcome(3, [150.0, 121.0], {"threads": 2})
    o.confirmation["valid_runs"] = 3  # the aggregate of 3 fresh runs: their mean, the first left out
    f = figure(o, noise_of(tied_study()))
    assert f.mean == 121.0 and f.n == 3 and "(3 runs)" in f.text()
    assert f.half_width == pytest.approx(f.noise.half_width(121.0, 3))


def test_study_naming_is_the_one_naming():
    outs = tied_study()
    assert study_naming(outs, "maximize", DEFAULTS).best is name_best(outs, "maximize").best


def test_the_stored_verdict_names_the_best_and_gives_its_reason():
    # the verdict tied trial 2 with the defaults; the defaults are named with its reason,
    # although the search put trial 2 on top (131 vs 100)
    outs = tied_study()
    verdict = Verdict(DecisionKind.TIED, named=0, reason="trial 2 is tied with the defaults.", candidate=2, baseline=0)
    outs[0].verdict = verdict.to_dict()
    named = name_best(outs, "maximize")
    assert named.best is outs[0] and named.why == verdict.reason and named.tied_with == [2] and named.remeasured
    assert named.to_dict()["kind"] == "TIED"
    # a verdict that keeps no config names none, whatever the search found
    nothing = Verdict(DecisionKind.NOTHING_MEETS, named=None, reason="nothing meets the targets.", candidate=2)
    outs[0].verdict = nothing.to_dict()
    named = name_best(outs, "maximize")
    assert named.best is None and named.verdict == nothing


def test_every_valid_run_of_a_confirmation_is_a_measurement_and_an_invalid_one_is_not():
    o = outcome(3, [120.0, 110.0], {"threads": 2})
    o.confirmation["runs"] = [
        {"objective": 110.0, "metrics": {"output_throughput": 110.0}, "valid": True},
        {"objective": 40.0, "metrics": {"output_throughput": 40.0}, "valid": False},
        {"objective": 112.0, "metrics": {"output_throughput": 112.0}, "valid": True},
    ]
    assert measurements(o, OBJECTIVE) == [120.0, 110.0, 112.0]
    assert measurements(o, "output_throughput") == [120.0, 110.0, 112.0]
