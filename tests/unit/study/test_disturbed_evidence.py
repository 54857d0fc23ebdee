"""A measurement that stayed disturbed is no evidence: naming, the fresh figures and the noise
pool pass it over."""

from __future__ import annotations

from kvtune.kinds import Direction
from kvtune.knobs import Candidate
from kvtune.study.measured_noise import OBJECTIVE, measurements, noise_of
from kvtune.study.naming import name_best
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import rank_fresh

BUSY = {"disturbed": True, "foreign_cores": 1.6, "reason": "disturbed: foreign CPU 1.60 cores"}


def outcome(
    n: int, objective: float, again: float | None = None, busy: bool = False, again_busy: bool = False
) -> TrialOutcome:
    o = TrialOutcome(
        number=n,
        candidate=Candidate(flags={"p": n}),
        argv=[],
        env={},
        launched=True,
        metrics={"output_throughput": objective},
        constraints={"server_ran": 0.0},
        objective=objective,
        objectives=[objective],
        interference=BUSY if busy else None,
    )
    if again is not None:
        o.confirmation = {
            "metrics": {"output_throughput": again},
            "objective": again,
            "objectives": [again],
            "feasible": True,
            "reason": "",
            "disturbed": again_busy,
        }
    return o


def test_a_disturbed_first_measurement_is_not_named_best_on_its_one_figure():
    quick_but_busy, steady = outcome(1, 90.0, busy=True), outcome(2, 50.0)
    assert name_best([quick_but_busy, steady], "maximize").best is steady


def test_a_disturbed_re_measurement_is_no_fresh_figure():
    busy_again, held = outcome(1, 60.0, again=80.0, again_busy=True), outcome(2, 50.0, again=50.0)
    busy_again.confirmation["no_valid_run"] = True  # every run disturbed, as tuner/remeasure.py flags it
    assert busy_again.fresh_objective is None and held.fresh_objective == 50.0
    assert rank_fresh([busy_again, held], Direction.MAXIMIZE) == [held]


def test_a_disturbed_measurement_is_no_repeat_in_the_noise_pool():
    assert measurements(outcome(1, 60.0, again=30.0, again_busy=True), OBJECTIVE) == [60.0]
    assert measurements(outcome(1, 60.0, again=58.0, busy=True), OBJECTIVE) == [58.0]
    clean = [outcome(1, 60.0, again=58.0), outcome(2, 40.0, again=41.0)]
    pooled = noise_of(clean)
    assert noise_of(clean + [outcome(3, 60.0, again=20.0, again_busy=True)]) == pooled


def test_the_disturbed_measurements_are_listed_with_their_fate():
    from kvtune.study.disturbed import disturbed_measurements

    remeasured = outcome(0, 50.0)
    remeasured.interference = {"disturbed": False, "foreign_cores": 0.02, "reason": "quiet"}
    remeasured.disturbed_attempts = [BUSY]
    stayed = outcome(4, 70.0, busy=True)
    stayed.disturbed_attempts = [dict(BUSY, foreign_cores=1.1), dict(BUSY, foreign_cores=1.2)]
    listed = disturbed_measurements([stayed, outcome(2, 60.0), remeasured])
    assert [(d.trial, d.measurement, d.remeasured, d.still_disturbed) for d in listed] == [
        (0, "first measurement", 1, False),
        (4, "first measurement", 2, True),
    ]
    assert listed[1].foreign_cores == 1.6 and "foreign CPU 1.60 cores" in listed[1].text()
    assert "re-measured 1x, then quiet" in listed[0].text() and "no evidence" in listed[1].text()
