"""The loop's coordinator (tuner/coordinator.py) when a study has one worker, and the seam the
cluster is reached through. A study's only worker stores no budget in the study and waits for
nobody; before its first ask it queues again the trial an earlier run left RUNNING when it was
killed (its worker process is gone), and leaves a live process's trial alone. In-memory Optuna
studies; the "worker" of a live trial is this test process (its pid and start time)."""

from __future__ import annotations

import os
from pathlib import Path

import optuna

from kvtune.devtools.arrows import arrows
from kvtune.launchers.process import process_start_ticks
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner import accounting
from kvtune.tuner.budget import Budget, StopReason
from kvtune.tuner.coordinator import Alone
from kvtune.tuner.loop import TunerContext
from kvtune.tuner.trial.context import Placement, Subject
from tests.conftest import TINY

S = optuna.trial.TrialState
ME = {"host": "here", "pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())}
GONE = {**ME, "start_ticks": -1}  # the pid now belongs to another process (or none)
# What imports tuner/fleet/ from outside it: the seam, and the two cluster commands.
SEAM = {"kvtune.tuner.cluster_seam", "kvtune.cli.worker", "kvtune.cli.confirm"}


def _alone(study: optuna.Study) -> Alone:
    spec = StudySpec(study="one", trials=4, time_budget_s=60.0, workload=TINY).validate()
    where = Placement(worker=ME)
    return Alone(TunerContext(Subject(spec, FakeLauncher(), []), where, study, Path("unused")))


def _running(study: optuna.Study, worker: dict | None) -> int:
    trial = study.ask({"speed": optuna.distributions.CategoricalDistribution([1, 2])})
    if worker is not None:
        trial.set_user_attr("worker", worker)
    return trial.number


def test_alone_runs_under_the_specs_budget_and_stores_none():
    study = optuna.create_study()
    alone = _alone(study)
    assert alone.begin() == alone.budget() == Budget(4, 60.0)
    assert accounting.BUDGET_ATTR not in study.user_attrs  # nobody else reads it
    assert accounting.clock_started(study)  # the time budget counts across resumed runs
    assert alone.summarizes and alone.step_back(study.ask()) is None
    assert not alone.wait_for_others(StopReason.TIME, accounting.spent(study))


def test_alone_queues_again_what_a_killed_run_left_running_before_its_first_ask():
    study = optuna.create_study()
    killed = _running(study, GONE)
    killed_before_it_recorded_itself = _running(study, None)
    live = _running(study, ME)  # (two runs of one study at once: the other one's trial is its own)
    _alone(study).begin()
    states = {t.number: t.state for t in study.trials}
    assert states[killed] == states[killed_before_it_recorded_itself] == S.FAIL
    assert states[live] == S.RUNNING
    queued = sorted(t.user_attrs["retry_of"] for t in study.trials if t.state == S.WAITING)
    assert queued == [killed, killed_before_it_recorded_itself]


def test_the_cluster_is_reached_through_its_seam_only():
    found, _ = arrows()
    outside = {a.importer for a in found if a.imported.startswith("kvtune.tuner.fleet")}
    outside = {m for m in outside if not m.startswith("kvtune.tuner.fleet")}
    assert outside <= SEAM, f"import tuner/fleet/ through tuner/cluster_seam.py instead: {sorted(outside - SEAM)}"
