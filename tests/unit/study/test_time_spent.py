"""The per-launch time record and its study sum (study/time_spent.py): what results.json, the
summary and the report say about where a study's hardware time went."""

from __future__ import annotations

import json

import pytest

from kvtune.knobs import Candidate
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import LOAD_SEARCH, PARTS, PHASES, SENTINEL, StudyTime, TimeSpent, with_failed_starts


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


def test_a_mid_search_sentinel_is_a_launch_and_the_end_point_is_counted_once():
    end = {"role": "sentinel", "time_spent": launch(30, 10)}  # the end point: the baseline's confirmation run
    results = {
        "trials": [trial(0, launch(60, 20), runs=[end]).to_dict()],
        "sentinel": {
            "series": [
                {"measured": 0, "first": True},  # the baseline's own measurement: its trial's launch
                {"measured": 10, "end": False, "time_spent": launch(30, 10, waits_s=5)},
                {"measured": 14, "end": True, "time_spent": end["time_spent"]},
            ]
        },
    }
    st = StudyTime.of_results(results)
    assert st.parts[SENTINEL].launches == 2 and st.parts[SENTINEL].spent.total_s == 85
    assert st.launches == 3 and st.lines()[0].endswith("sentinel 1m25s (2 launches)")


def test_a_failed_start_counts_in_the_launch_that_ran_which_keeps_its_cache_hit():
    ran = launch(30, 60, True, teardown_s=2)
    failed = [TimeSpent(startup_s=120, waits_s=5).to_dict(), None]  # a timeout; one that kept no record
    assert with_failed_starts(ran, failed) == launch(150, 60, True, teardown_s=2, waits_s=5)
    assert with_failed_starts(ran, []) == ran and with_failed_starts(None, failed) is None


def test_the_anchors_runs_and_the_load_search_are_parts_of_their_own():
    anchor = {
        "runs": [
            {"disturbed": True, "time_spent": launch(40, 20, waits_s=30)},  # measured again, disturbed too
            {"disturbed": False, "time_spent": launch(40, 20, True)},
            {"disturbed": True, "time_spent": None},  # never started: no launch to count
        ],
        "quiet": {"disturbed": False, "time_spent": launch(40, 20, True)},  # the second run again: not twice
    }
    load = {"load": {"trial": 3, "held": 2.0}, "time_spent": launch(30, 200, False, warmup_s=10)}
    st = StudyTime.of([trial(0, launch(60, 20, False))], anchor=anchor, load_search=load)
    d = st.to_dict()
    assert list(d)[: len(PARTS)] == ["search", "sentinel", "anchor", "confirmation", "load_search"]
    assert d["anchor"]["launches"] == 2 and d["anchor"]["total_s"] == 150
    assert (d["anchor"]["startup_s"], d["anchor"]["measurement_s"], d["anchor"]["waits_s"]) == (80, 40, 30)
    assert d["anchor"]["cache_hits"] == 1
    assert d["load_search"]["launches"] == 1 and d["load_search"]["total_s"] == 240
    assert d["load_search"]["warmup_s"] == 10 and d["load_search"]["cache_misses"] == 1
    assert d["launches"] == 4 and d["total_s"] == 80 + 150 + 240
    assert st.lines()[0] == (
        "hardware time: 7m50s in 4 launches: search 1m20s (1 launch), anchor 2m30s (2 launches), "
        "load search 4m (1 launch)"
    )


def test_a_load_search_that_launched_nothing_counts_nothing():
    none_holds = {"load": {"trial": 3, "held": 0.0, "levels": []}}  # missed at the lowest load: no launch
    no_room = {"needs_s": 900, "trial": 3}  # the time budget left no room
    for record in (none_holds, no_room, None):
        st = StudyTime.of([trial(0, launch(60, 20))], load_search=record)
        assert st.parts[LOAD_SEARCH].launches == 0 and st.launches == 1
        assert "load search" not in st.lines()[0] and "anchor" not in st.lines()[0]


def test_results_json_reads_the_anchor_and_the_load_search_back():
    trials = [trial(0, launch(60, 20, False), runs=[{"role": "proof", "time_spent": launch(40, 20, True)}])]
    results = {
        "trials": [o.to_dict() for o in trials],
        "anchor": {"runs": [{"quiet": True, "time_spent": launch(40, 20)}]},
        "load_search": {"load": {"trial": 0}, "time_spent": launch(30, 100)},
    }
    results["time_spent"] = StudyTime.of_results(results).to_dict()
    back = json.loads(json.dumps(results))
    assert StudyTime.of_results(back).to_dict() == back["time_spent"] == results["time_spent"]
    assert back["time_spent"]["anchor"]["launches"] == 1 and back["time_spent"]["load_search"]["total_s"] == 130
    assert StudyTime.of_results({"trials": back["trials"]}).launches == 2  # an older file: no such blocks
