"""The baseline as a sentinel (tuner/sentinel.py): when a point is due, the point stored in the
study (the end point also the baseline's confirmation run), the series as shown, and the drift of
its first against its last undisturbed point. In-memory study; a scripted re-measurer."""

from __future__ import annotations

from dataclasses import dataclass, field

import optuna

from kvtune.knobs import Candidate
from kvtune.study.measured_noise import Noise
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import SENTINEL, StudyTime, TimeSpent
from kvtune.tuner import sentinel
from kvtune.tuner.events import Callbacks
from kvtune.tuner.sentinel import HEADLINE_METRICS, SENTINELS_ATTR, drift, due, measure, report, series

NOISE = Noise(rel_sd=0.02, dof=10)


def baseline(value: float | None = 100.0) -> TrialOutcome:
    return TrialOutcome(
        number=0,
        candidate=Candidate(),
        argv=[],
        env={},
        baseline=True,
        metrics={"output_throughput": value} if value else None,
        constraints={"x": -1.0},
        objective=value,
        objectives=[value],
    )


def point(measured: int, objective: float | None, disturbed: bool = False) -> dict:
    return {
        "measured": measured,
        "at": 1.0,
        "end": False,
        "objective": objective,
        "feasible": True,
        "disturbed": disturbed,
    }


def test_a_point_is_due_every_n_measured_trials_and_at_the_end_never_twice_at_one_count():
    study = optuna.create_study()
    assert not due(study, 0, end=True)
    assert due(study, 10) and not due(study, 9) and due(study, 9, end=True)
    assert due(study, 4, every=2) and not due(study, 5, every=2)
    study.set_user_attr(SENTINELS_ATTR, [point(10, 99.0)])
    assert not due(study, 10) and not due(study, 10, end=True)  # a resume, or an end right after


@dataclass
class ScriptedRemeasurer:
    value: float | None
    spent: TimeSpent | None = None  # the launch's hardware-seconds
    phases: list[str] = field(default_factory=list)
    added: list[tuple[int, dict]] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)  # where each launch's time is counted

    @property
    def callbacks(self) -> Callbacks:
        return Callbacks(phase=lambda n, p: self.phases.append(p))

    def seed(self) -> int:
        return 42

    def launch(self, o: TrialOutcome, role: str, part: str) -> TrialOutcome | None:
        self.parts.append(part)
        if self.value is None:
            return None
        again = baseline(self.value)
        again.metrics = {"output_throughput": self.value, "p95_ttft_ms": 5.0, "not_headline": 1.0}
        again.time_spent = None if self.spent is None else self.spent.to_dict()
        return again

    def add(self, o: TrialOutcome, run: dict, base: TrialOutcome | None) -> None:
        assert base is o  # the end point confirms the baseline: it is its own reference
        self.added.append((o.number, run))


def test_a_mid_search_point_is_stored_and_only_the_end_point_confirms_the_baseline():
    study = optuna.create_study()
    r = ScriptedRemeasurer(97.0)
    run = measure(r, study, baseline(), 10)  # type: ignore[arg-type]
    assert run is not None and run["role"] == "sentinel" and run["seed"] == 42
    (stored,) = sentinel.stored(study)
    assert (stored["measured"], stored["objective"], stored["end"], stored["disturbed"]) == (10, 97.0, False, False)
    assert set(stored["metrics"]) == {"output_throughput", "p95_ttft_ms"} <= set(HEADLINE_METRICS)
    assert r.added == [] and "baseline sentinel after 10 measured trials" in r.phases
    measure(r, study, baseline(), 14, end=True)  # type: ignore[arg-type]
    assert [p["measured"] for p in sentinel.stored(study)] == [10, 14]
    assert [n for n, _ in r.added] == [0] and "(end of the search)" in r.phases[-1]
    assert r.parts == [SENTINEL, SENTINEL]  # a launch that never started counts as the sentinel's


def test_each_point_keeps_its_launchs_time_and_the_study_counts_every_launch_once():
    """A mid-search point is one sentinel launch; the end point's run is the baseline's
    confirmation run, counted there and not again from the series."""
    study, base = optuna.create_study(), baseline()
    r = ScriptedRemeasurer(97.0, TimeSpent(startup_s=30.0, measurement_s=10.0))
    measure(r, study, base, 10)  # type: ignore[arg-type]
    measure(r, study, base, 14, end=True)  # type: ignore[arg-type]
    assert [p["time_spent"]["total_s"] for p in sentinel.stored(study)] == [40.0, 40.0]
    base.confirmation = {"runs": [run for _, run in r.added]}
    block = report(study, base, NOISE)
    assert block is not None
    st = StudyTime.of([base], sentinel=block)
    assert st.parts[SENTINEL].launches == 2 and st.parts[SENTINEL].spent.total_s == 80.0


def test_a_sentinel_that_never_started_stores_nothing():
    study = optuna.create_study()
    assert measure(ScriptedRemeasurer(None), study, baseline(), 10) is None  # type: ignore[arg-type]
    assert sentinel.stored(study) == []


def test_the_series_starts_with_the_baselines_first_measurement_then_the_points_in_order():
    shown = series([point(20, 95.0), point(10, 98.0)], baseline(100.0))
    assert [p["measured"] for p in shown] == [0, 10, 20] and shown[0]["first"]
    assert [p["measured"] for p in series([point(10, 98.0)], None)] == [10]
    assert [p["measured"] for p in series([point(10, 98.0)], baseline(None))] == [10]


def test_drift_compares_the_first_and_last_undisturbed_points():
    points = [point(0, 100.0), point(10, 50.0, disturbed=True), point(20, 80.0), point(30, None)]
    d = drift(points, NOISE)
    assert d is not None
    assert (d["first"], d["last"], d["ratio"], d["from_measured"], d["to_measured"]) == (100.0, 80.0, 0.8, 0, 20)
    assert d["points"] == 4 and d["beyond_noise"] and d["noise"] == NOISE.source()
    close = drift([point(0, 100.0), point(10, 100.5)], NOISE)
    assert close is not None and not close["beyond_noise"]
    assert drift([point(0, 100.0), point(10, 0.0)], NOISE) is None  # one usable point: no drift


def test_the_report_is_none_until_a_point_was_measured():
    study = optuna.create_study()
    assert report(study, baseline(), NOISE) is None
    study.set_user_attr(SENTINELS_ATTR, [point(10, 90.0)])
    out = report(study, baseline(100.0), NOISE, every=5)
    assert out is not None and out["every"] == 5 and [p["measured"] for p in out["series"]] == [0, 10]
    assert out["drift"]["ratio"] == 0.9
