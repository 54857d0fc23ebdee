"""A study set up for a scheduler's workers: what is stored, what waits for the first worker,
and what the export reads back. SQLite in the test's folder; no process is started, and the
trials that get as far as an outcome (duplicates, told without a launch) are given a fixed port
that nothing binds."""

from functools import partial

import optuna
import pytest

from kvtune.errors import SpecError
from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner import accounting
from kvtune.tuner.assemble import open_tuner, prepare
from kvtune.tuner.budget import Budget
from kvtune.tuner.fleet.setup import read_set_up, set_up_study
from kvtune.tuner.fleet.shared import Shared
from kvtune.tuner.loop import MAX_DUPLICATES_IN_A_ROW
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.tuner.store.storage import sqlite_url
from tests.conftest import TINY

PORT = 18433  # each trial's server port: never bound, no server is started here
EXTRA_WORKER = partial(Shared, summarizes=False)  # a worker that shares the study and leaves when it is done


def prepared(tmp_path):
    spec = StudySpec(study="sched", trials=9, workload=TINY, startup_timeout_s=20).validate()
    return prepare(spec, launcher=FakeLauncher(model_path="/models/m.gguf"), runs_dir=str(tmp_path / "runs"))


def test_set_up_stores_spec_baseline_budget_and_gpus_but_no_hardware_or_clock(tmp_path):
    url = sqlite_url(tmp_path)
    study = set_up_study(prepared(tmp_path), url, gpus_per_trial=2)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.WAITING]  # the baseline, queued
    assert study.trials[0].user_attrs["baseline"] is True
    assert StudySpec.from_dict(study.user_attrs["spec"]).trials == 9
    assert accounting.load_budget(study, Budget(1)).trials == 9
    assert "hardware" not in study.user_attrs  # the login node is not where trials run
    assert not accounting.clock_started(study)  # queue time is not tuning time
    stored = read_set_up("sched", url)
    assert (stored.name, stored.gpus_per_trial, stored.spec.trials, stored.finished_trials) == ("sched", 2, 9, 0)
    assert stored.model_path == "/models/m.gguf"  # as the launcher resolved it: the pod mounts it there


def test_the_first_worker_records_its_hardware(tmp_path):
    url = sqlite_url(tmp_path)
    set_up_study(prepared(tmp_path), url)
    worker = open_tuner(prepared(tmp_path), storage_url=url, coordinate=EXTRA_WORKER)
    assert worker.study.user_attrs["hardware"] == prepared(tmp_path).hardware
    assert len(worker.study.trials) == 1  # joining queues no second baseline


def test_reading_a_missing_study_names_the_set_up_command(tmp_path):
    with pytest.raises(SpecError, match="no study 'nope'"):
        read_set_up("nope", sqlite_url(tmp_path))


class AnotherWorkerTells:
    """The loop's clock: each wait stands in for time passing on another node, where the worker
    that holds `trial` tells it during the first wait (its measurement ends there)."""

    def __init__(self, study: optuna.Study, trial: optuna.trial.Trial):
        self.study, self.trial, self.waits, self.now = study, trial, 0, 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.waits += 1
        if self.waits == 1:
            self.study.tell(self.trial, 1.0)


def _one_trial_running_elsewhere(tmp_path, trials=1):
    """A set-up study whose baseline another worker holds, and a second worker."""
    spec = StudySpec(study="sched", trials=trials, workload=TINY, startup_timeout_s=20).validate()
    prep = prepare(spec, launcher=FakeLauncher(model_path="/models/m.gguf"), runs_dir=str(tmp_path / "runs"))
    url = sqlite_url(tmp_path)
    set_up_study(prep, url)
    worker = open_tuner(prep, storage_url=url, coordinate=EXTRA_WORKER, ports=lambda host: PORT)
    elsewhere = worker.study.ask()  # the queued baseline, now RUNNING on the other node
    worker.coordinator.clock = AnotherWorkerTells(worker.study, elsewhere)
    return worker


def test_a_scheduler_worker_stays_while_the_last_trial_runs_elsewhere(tmp_path):
    """No creator waits on a set-up study: if its workers all left while a trial ran elsewhere,
    a dead worker's trial would never be re-queued and re-run. So they stay until it ends."""
    worker = _one_trial_running_elsewhere(tmp_path)
    worker.coordinator.stays = True  # as workers.join has it for a set-up study
    worker.run()
    assert worker.coordinator.clock.waits == 1  # waited, and left once the other worker told its trial
    assert [t.state for t in worker.study.trials] == [optuna.trial.TrialState.COMPLETE]


def test_an_extra_worker_of_a_watched_study_leaves_at_once(tmp_path):
    """Where the creator waits (and re-queues a dead worker's trial), an extra worker leaves."""
    worker = _one_trial_running_elsewhere(tmp_path)
    worker.run()
    assert worker.coordinator.clock.waits == 0
    assert [t.state for t in worker.study.trials] == [optuna.trial.TrialState.RUNNING]


def _only_measured_configs_left(worker) -> None:
    """The worker's space holds one config (speed 2.0), already measured by trial 1: every ask
    from now on is a duplicate, told at once without a launch."""
    space = SearchSpace([Knob("speed", KnobKind.FLOAT, low=2.0, high=2.0)], worker.launcher)
    measured = TrialOutcome(
        1, Candidate(flags={"speed": 2.0}), argv=["fake"], env={}, launched=True, metrics={"ttft_p50_ms": 250.0}
    )
    worker.study.add_trial(
        optuna.trial.create_trial(
            params={"speed": 2.0},
            distributions={"speed": optuna.distributions.FloatDistribution(2.0, 2.0)},
            value=1.0,
            user_attrs={"outcome": to_jsonable(measured)},
        )
    )
    worker.space = space


def test_a_worker_offered_only_duplicates_stays_while_a_trial_runs_elsewhere(tmp_path):
    """The sampler keeps proposing measured configs (an endless space, so not "tried all"), but
    the baseline still runs on another node: it may die and be re-queued, so the worker waits
    for it before it calls the space exhausted."""
    worker = _one_trial_running_elsewhere(tmp_path, trials=50)
    worker.coordinator.stays = True
    _only_measured_configs_left(worker)
    worker.run()
    assert worker.coordinator.clock.waits == 1  # waited once, and left when the other worker told its trial
    assert worker.budget_report["stopped"] == str(accounting.EXHAUSTED)
    states = [t.state for t in worker.study.trials]
    assert states[:2] == [optuna.trial.TrialState.COMPLETE] * 2
    duplicates = [t for t in worker.study.trials[2:] if t.user_attrs["outcome"]["duplicate_of"] == 1]
    assert len(duplicates) == len(states) - 2 == MAX_DUPLICATES_IN_A_ROW


def test_an_extra_worker_offered_only_duplicates_leaves_at_once(tmp_path):
    """Where the creator waits (and re-queues a dead worker's trial), an extra worker leaves."""
    worker = _one_trial_running_elsewhere(tmp_path, trials=50)
    _only_measured_configs_left(worker)
    worker.run()
    assert worker.coordinator.clock.waits == 0
    assert worker.study.trials[0].state == optuna.trial.TrialState.RUNNING
