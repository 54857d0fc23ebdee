"""The per-launch time record and its study sum (study/time_spent.py): what results.json, the
summary and the report say about where a study's hardware time went."""

from __future__ import annotations

import pytest

from kvtune.knobs import Candidate
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import PHASES, StudyTime, TimeSpent


def launch(startup: float, measurement: float, hit: bool | None = None, **more: float) -> dict:
    return TimeSpent(startup_s=startup, measurement_s=measurement, cache_hit=hit, **more).to_dict()


def trial(n: int, spent: dict | None, runs: list[dict] | None = None) -> TrialOutcome:
    o = TrialOutcome(number=n, candidate=Candidate(), argv=[], env={}, time_spent=spent)
    o.confirmation = {"runs": runs} if runs is not None else None
    return o


def test_a_record_reads_back_and_totals_its_phases():
    t = TimeSpent(startup_s=30, warmup_s=2, measurement_s=10, fidelity_s=1, teardown_s=0.5, waits_s=4, cache_hit=True)
    d = t.to_dict()
    assert d["total_s"] == 47.5 and d["cache_hit"] is True
    assert set(d) == {f"{p}_s" for p in PHASES} | {"total_s", "cache_hit"}
    assert TimeSpent.from_dict(d) == t
    assert TimeSpent.from_dict(None) is None and TimeSpent.from_dict({}) is None


def test_a_sum_adds_every_phase_and_has_no_single_cache_hit():
    a, b = TimeSpent(startup_s=60, cache_hit=False), TimeSpent(startup_s=40, measurement_s=20, cache_hit=True)
    assert (a + b) == TimeSpent(startup_s=100, measurement_s=20)


def test_the_study_sum_splits_search_sentinels_and_confirmation_and_counts_cache_hits():
    trials = [
        trial(
            0,
            launch(60, 20, False),
            runs=[
                {"role": "sentinel", "time_spent": launch(40, 20, True)},
                {"role": "proof", "time_spent": launch(40, 20, True)},
            ],
        ),
        trial(
            1,
            launch(60, 10, False, waits_s=5),
            runs=[
                {"role": "screen", "time_spent": launch(40, 20, True)},
                {"role": "proof"},  # an older run record: no time kept, nothing counted
            ],
        ),
        trial(2, None),  # a pre-screen rejection or a duplicate: launched nothing
    ]
    st = StudyTime.of(trials)
    d = st.to_dict()
    assert d["search"]["launches"] == 2 and d["search"]["total_s"] == 155
    assert d["sentinel"]["launches"] == 1 and d["sentinel"]["total_s"] == 60
    assert d["confirmation"]["launches"] == 2 and d["confirmation"]["total_s"] == 120
    assert d["total_s"] == 335 and d["launches"] == 5
    assert d["phases_s"]["startup"] == 240 and d["phases_s"]["waits"] == 5
    assert d["shares"]["startup"] == pytest.approx(240 / 335, abs=1e-4)
    assert sum(d["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert (d["search"]["cache_misses"], d["confirmation"]["cache_hits"], d["sentinel"]["cache_hits"]) == (2, 2, 1)


def test_the_lines_say_where_the_time_went():
    lines = StudyTime.of(
        [trial(0, launch(60, 20, False), runs=[{"role": "proof", "time_spent": launch(40, 20, True)}])]
    ).lines()
    assert lines[0] == "hardware time: 2m20s in 2 launches: search 1m20s (1 launch), confirmation 1m (1 launch)"
    assert lines[1] == "  by phase: start-up 1m40s (71%), measurement 40s (29%)"
    assert lines[2] == "  compile cache: 1 start-ups loaded compiled graphs, 1 compiled"


def test_nothing_timed_says_nothing():
    assert StudyTime.of([trial(0, None)]).lines() == []
    assert StudyTime.of([]).to_dict()["total_s"] == 0


def test_results_json_trials_sum_as_the_outcomes_do():
    trials = [trial(0, launch(60, 20, False), runs=[{"role": "proof", "time_spent": launch(40, 20, True)}])]
    assert StudyTime.of([o.to_dict() for o in trials]).to_dict() == StudyTime.of(trials).to_dict()


def test_one_launch_is_one_launch():
    line = StudyTime.of([trial(0, launch(6.8, 320, waits_s=894))]).lines()[0]
    assert line == "hardware time: 20m21s in 1 launch: search 20m21s (1 launch)"
