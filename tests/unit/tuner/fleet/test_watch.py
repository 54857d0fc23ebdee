"""Reading a study from its storage while it runs (`kvtune show --storage`): the trials told so
far, where it stands, and nothing written."""

from __future__ import annotations

import hashlib

import optuna
import pytest

from kvtune.errors import SpecError
from kvtune.jsonsafe import to_jsonable
from kvtune.knobs import Candidate
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.study.spec import StudySpec, parse_objectives
from kvtune.tuner.fleet.watch import Progress, read_study
from kvtune.tuner.store import storage
from kvtune.workload import Workload

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
