"""Reading a study from its storage while it runs (`kvtune show --storage`): the trials told so
far, the study-level blocks the session's results.json has (so the time lines count the same
launches), where it stands, and nothing written."""

from __future__ import annotations

import hashlib

import optuna
import pytest

from kvtune.errors import SpecError
from kvtune.jsonsafe import to_jsonable
from kvtune.knobs import Candidate
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.study.spec import StudySpec, parse_objectives
from kvtune.study.time_spent import StudyTime, TimeSpent
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner import accounting, load_search, sentinel
from kvtune.tuner.anchor import ANCHOR_ATTR
from kvtune.tuner.events import Callbacks
from kvtune.tuner.fleet.watch import Progress, read_study
from kvtune.tuner.session import RunOptions, open_session
from kvtune.tuner.store import storage
from kvtune.workload import Workload
from tests.conftest import TINY

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")


def test_progress_says_whether_the_study_still_runs():
    assert (
        Progress(2, 1, 5, 40).line() == "still running: 2 trial(s) in flight, 1 queued; 5 of 40 configs measured so far"
    )
    assert Progress(0, 0, 40, 40).line() == "no trial in flight: 40 of 40 configs measured"
    assert Progress(0, 1, 3, 40).in_flight and not Progress(0, 0, 3, 40).in_flight


def _study_with_one_told_and_one_running(url: str) -> None:
    spec = StudySpec(
        study="watched", trials=7, workload=Workload(num_requests=2), objective=parse_objectives("ttft_p95")
    ).validate()
    study = storage.open_study("watched", url, ["minimize"], {"k": 1})
    study.set_user_attr("spec", spec.to_dict())
    o = TrialOutcome(
        number=0,
        candidate=Candidate(flags={}),
        argv=["srv"],
        env={},
        metrics={"p95_ttft_ms": 120.0},
        constraints={RUNS_KEY: -1.0},
        objective=120.0,
        objectives=[120.0],
        baseline=True,
    )
    study.add_trial(
        optuna.trial.create_trial(params={}, distributions={}, value=120.0, user_attrs={"outcome": to_jsonable(o)})
    )
    study.ask()  # a worker elsewhere measures this one now


def test_a_running_study_reads_as_its_trials_so_far_and_is_left_as_it_was(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    _study_with_one_told_and_one_running(url)
    before = hashlib.sha256((tmp_path / "study.db").read_bytes()).hexdigest()
    payload, progress = read_study("watched", url)
    assert [t["number"] for t in payload["trials"]] == [0] and payload["baseline_trial"] == 0
    assert payload["targets"] and payload["study"] == "watched"
    assert progress == Progress(running=1, waiting=0, measured=1, budget=7)
    assert hashlib.sha256((tmp_path / "study.db").read_bytes()).hexdigest() == before


def test_a_study_kvtune_did_not_create_is_refused_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(study_name="foreign", storage=url)
    with pytest.raises(SpecError, match="not created by kvtune"):
        read_study("foreign", url)


def test_the_anchor_the_load_search_and_the_sentinels_count_as_in_the_sessions_results_json(tmp_path):
    """`kvtune show --storage` and `kvtune report --storage` read the study-level blocks and the
    hardware time the session writes into results.json, not the trials' alone."""
    spec = StudySpec(study="s", trials=3, workload=TINY, startup_timeout_s=20).validate()
    s = open_session(RunOptions(runs_dir=str(tmp_path / "runs")), spec, Callbacks(), launcher=FakeLauncher())
    study = s.tuner.study
    fresh = TimeSpent(startup_s=20.0, measurement_s=10.0, teardown_s=1.0).to_dict()
    study.set_user_attr(ANCHOR_ATTR, {"runs": [{"quiet": False, "time_spent": fresh}] * 2, "gave_up": True})
    study.set_user_attr(load_search.LOAD_ATTR, {"load": {"trial": 0, "held": 2.0}, "time_spent": fresh})
    point = {"measured": 10, "at": 1.0, "end": False, "objective": 9.0, "disturbed": False, "time_spent": fresh}
    study.set_user_attr(sentinel.SENTINELS_ATTR, [point])
    accounting.keep_never_started(study, "sentinel", 0, [TimeSpent(startup_s=7.0).to_dict()])
    written = s.results(s.tuner.outcomes(), final=False).payload
    payload, _ = read_study(s.prepared.study_name, s.storage_url)
    for block in ("anchor", "load_search", "sentinel", "never_started", "time_spent"):
        assert payload[block] == written[block], block
    st = StudyTime.of_results(payload)
    assert (st.parts["anchor"].launches, st.parts["load_search"].launches, st.parts["sentinel"].launches) == (2, 1, 2)
    assert payload["time_spent"]["total_s"] == 4 * 31.0 + 7.0 and st.never_started == 1
