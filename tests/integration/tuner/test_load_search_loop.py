"""Issue 41 §2: when nothing met the targets, one fresh server of the nearest config measures the
load at which they hold, below the load asked, bounded in levels; a time budget without room for
it launches nothing and says what it needs (fake launcher: real processes and storage, the load
measured on virtual time so a loaded machine cannot move the fake's 300 ms TTFT)."""

from __future__ import annotations

from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.study.time_spent import LOAD_SEARCH, StudyTime, TimeSpent
from kvtune.testing.virtual_bench import RecordingFakeLauncher, VirtualBench
from kvtune.tuner import load_search
from kvtune.workload import Workload

WL = Workload(concurrency=4, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=1, request_timeout_s=10)


def _tuner(make_tuner, target: str):
    spec = StudySpec(
        study="load",
        trials=1,
        workload=WL,
        targets=[target],
        confirm_top=0,
        early_stop=False,
        startup_timeout_s=20,
        informed_start=False,
    ).validate()
    launcher = RecordingFakeLauncher(base_ttft_ms=300, knobs=(Knob("speed", "choices", choices=(1,)),))
    tuner, _ = make_tuner(spec, launcher, bench=VirtualBench(launcher))
    [base] = tuner.run()
    assert not base.feasible  # the defaults miss at 4 users: nothing met the targets
    return tuner, launcher


def test_the_nearest_config_is_searched_below_the_load_asked_and_the_record_is_kept(make_tuner):
    tuner, launcher = _tuner(make_tuner, "ttft_p95<100ms")  # 300 ms at any load: no load holds
    launches = len(launcher.commands)
    record = load_search.search_load(tuner.runner, tuner.records, tuner.cb, tuner.run_dir, None)
    assert record is not None and len(launcher.commands) == launches + 1  # one fresh server
    found = record["load"]
    assert (found["trial"], found["unit"], found["asked"], found["held"]) == (0, "users", 4.0, 0.0)
    loads = [level["load"] for level in found["levels"]]
    assert loads and max(loads) < 4.0 and len(loads) <= load_search.MAX_LEVELS  # the known break is not re-measured
    assert (tuner.run_dir / "trials" / "0000-load").is_dir()
    # its launch is the study's hardware time, by phase, counted as the load search's
    spent = TimeSpent.from_dict(record["time_spent"])
    assert spent is not None and spent.of("startup") > 0 and spent.of("measurement") > 0
    st = StudyTime.of(tuner.outcomes(), load_search=record)
    assert st.parts[LOAD_SEARCH].launches == 1 and st.parts[LOAD_SEARCH].spent == spent
    # kept in the study: a resumed run reads it back and launches nothing
    again = load_search.search_load(tuner.runner, tuner.records, tuner.cb, tuner.run_dir, None)
    assert again == record and len(launcher.commands) == launches + 1


def test_a_time_budget_without_room_launches_nothing_and_says_what_it_needs(make_tuner):
    tuner, launcher = _tuner(make_tuner, "ttft_p95<100ms")
    launches = len(launcher.commands)
    record = load_search.search_load(tuner.runner, tuner.records, tuner.cb, tuner.run_dir, time_budget_s=0.001)
    assert record is not None and "load" not in record and record["needs_s"] > 0
    assert len(launcher.commands) == launches
    assert load_search.LOAD_ATTR not in tuner.study.user_attrs  # a later run with more time searches
