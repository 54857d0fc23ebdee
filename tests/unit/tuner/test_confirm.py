"""Issue 12: the named best is a re-measured best. A confirmation whose leaders regress walks
down the ranking instead of crowning a config measured once; ties go to the defaults.

The tests here start no process; those that do are in tests/integration/tuner/test_confirm.py."""

from __future__ import annotations

from kvtune.knobs import Candidate
from kvtune.study.naming import comparison_metrics, name_best
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


def test_a_tie_within_noise_names_the_defaults():
    base = _outcome(0, [100.0, 98.0], {}, baseline=True)
    tuned = _outcome(1, [104.0, 103.0], {"parallel": 8, "threads": 2})
    naming = name_best([base, tuned], "maximize")
    assert naming.best is base and "no change beat the defaults by more than the noise" in naming.why


def test_a_clear_win_is_named_with_its_evidence():
    base = _outcome(0, [100.0, 98.0], {}, baseline=True)
    tuned = _outcome(1, [140.0, 138.0], {"parallel": 8})
    naming = name_best([base, tuned], "maximize")
    assert naming.best is tuned and naming.remeasured and "best by more than the noise" in naming.why


def test_nothing_held_is_said():
    base = _outcome(0, [100.0], {}, baseline=True)
    tuned = _outcome(1, [140.0, 60.0], {"parallel": 8})
    tuned.confirmation["feasible"] = False
    naming = name_best([base, tuned], "maximize")
    assert naming.best is base and not naming.remeasured and "no re-measured config held" in naming.why


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
