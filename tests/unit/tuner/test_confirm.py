"""Issue 12, issue 37: the named best is the verdict's; re-measurements alone name nothing.

The tests here start no process; those that do are in tests/integration/tuner/test_confirm.py."""

from __future__ import annotations

from kvtune.knobs import Candidate
from kvtune.study.naming import NOT_CONFIRMED, comparison_metrics, name_best
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.confirmation import expected_s


def _outcome(number: int, values: list[float], flags: dict, baseline: bool = False) -> TrialOutcome:
    o = TrialOutcome(
        number=number,
        candidate=Candidate(flags=flags),
        argv=["x"],
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
            "feasible": True,
            "reason": "",
        }
    return o


def test_re_measurements_without_a_verdict_name_no_winner_of_their_own():
    """No second standard of proof: without the verdict, re-measurements compared under the pooled
    noise do not pick the defaults or a winner; the search's top is named, and said to be unproven."""
    base = _outcome(0, [100.0, 98.0], {}, baseline=True)
    tuned = _outcome(1, [104.0, 103.0], {"parallel": 8, "threads": 2})
    naming = name_best([base, tuned], "maximize")
    assert naming.best is tuned and naming.why == NOT_CONFIRMED and not naming.remeasured


def test_a_config_shown_to_fail_on_fresh_servers_is_not_named():
    base = _outcome(0, [100.0], {}, baseline=True)
    tuned = _outcome(1, [140.0, 60.0], {"parallel": 8})
    tuned.confirmation["feasible"] = False
    naming = name_best([base, tuned], "maximize")
    assert naming.best is base and naming.why == NOT_CONFIRMED


def test_best_vs_baseline_uses_the_same_number_of_measurements():
    # issue 22 §5: the re-measurements of both (the best's first was selected: biased up)
    base = _outcome(0, [100.0, 90.0], {}, baseline=True)
    tuned = _outcome(1, [120.0, 140.0], {"parallel": 8})
    best_m, base_m, n = comparison_metrics(tuned, base)
    assert n == 1 and best_m["output_throughput"] == 140.0 and base_m["output_throughput"] == 90.0
    once = _outcome(2, [150.0], {"parallel": 4})
    best_m, base_m, n = comparison_metrics(once, base)
    assert n == 1 and best_m["output_throughput"] == 150.0 and base_m["output_throughput"] == 100.0


def test_expected_time_is_the_first_start_up_and_measurement():
    o = _outcome(1, [100.0], {"parallel": 8})
    assert expected_s(o) is None  # no wall time recorded: the confirmation tries it
    o.metrics["measure_s"], o.startup_s = 12.5, 3.0
    assert expected_s(o) == 15.5
