"""Recovering a dead worker's trial (tuner/fleet/recovery.py) on an in-memory Optuna study: a
RUNNING trial whose worker on this host is gone is failed and queued again once, keeping whether
it was the baseline; a live worker's trial and another host's are left alone; the same parameters
running elsewhere are seen. The "worker" of a live trial is this test process itself (its pid and
start time), a dead one a pid whose start time does not match."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import optuna

from kvtune.launchers.process import process_start_ticks
from kvtune.tuner.fleet.recovery import host_lock, recover, running_elsewhere
from kvtune.tuner.requeue import alive, requeue
from kvtune.tuner.store.storage import GRACE_S

S = optuna.trial.TrialState
ME = {"host": "here", "pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())}
GONE = {**ME, "start_ticks": -1}  # the pid now belongs to another process (or none)


def running(study: optuna.Study, params: dict, started: datetime | None = None, **attrs) -> optuna.trial.FrozenTrial:
    """A RUNNING trial with these parameters and user attrs, started at `started` (now)."""
    study.add_trial(
        optuna.trial.FrozenTrial(
            number=0,  # the storage numbers it
            state=S.RUNNING,
            value=None,
            datetime_start=started or datetime.now(),
            datetime_complete=None,
            params=params,
            distributions={k: optuna.distributions.CategoricalDistribution([1, 2, 4]) for k in params},
            user_attrs=attrs,
            system_attrs={},
            intermediate_values={},
            trial_id=0,
        )
    )
    return study.trials[-1]


def test_alive_is_the_same_process_still_running():
    assert alive(ME)
    assert not alive(GONE) and not alive({}) and not alive({"pid": 0})


def test_a_dead_workers_trial_on_this_host_is_failed_and_queued_again_once(tmp_path):
    study = optuna.create_study()
    dead = running(study, {"speed": 2}, worker=GONE, baseline=True)
    live = running(study, {"speed": 4}, worker=ME)
    elsewhere = running(study, {"speed": 1}, worker={**GONE, "host": "there"})
    recover(study, tmp_path, "here")
    states = {t.number: t.state for t in study.trials}
    assert states[dead.number] == S.FAIL
    assert states[live.number] == S.RUNNING and states[elsewhere.number] == S.RUNNING
    (queued,) = [t for t in study.trials if t.state == S.WAITING]
    assert queued.user_attrs == {"baseline": True, "retry_of": dead.number}
    recover(study, tmp_path, "here")  # nothing more to do: it is queued once
    assert sum(t.state == S.WAITING for t in study.trials) == 1
    assert (tmp_path / ".recover.lock").exists()


def test_a_trial_killed_before_it_recorded_its_worker_is_recovered_after_the_grace_period(tmp_path):
    study = optuna.create_study()
    fresh = running(study, {"speed": 2})  # maybe just asked: left alone
    old = running(study, {"speed": 4}, started=datetime.now() - timedelta(seconds=GRACE_S + 5))
    recover(study, tmp_path, "here")
    assert study.trials[fresh.number].state == S.RUNNING
    assert study.trials[old.number].state == S.FAIL
    assert [t.user_attrs for t in study.trials if t.state == S.WAITING] == [{"retry_of": old.number}]


def test_a_retry_of_a_retry_points_at_the_first_trial():
    study = optuna.create_study()
    study.add_trial(
        optuna.trial.create_trial(
            state=S.FAIL,
            params={"speed": 2},
            distributions={"speed": optuna.distributions.CategoricalDistribution([2])},
            user_attrs={"retry_of": 0, "warm_start": "old#1", "worker": GONE},
        )
    )
    requeue(study, study.trials[0])
    queued = study.trials[-1]
    assert queued.state == S.WAITING and queued.user_attrs == {"warm_start": "old#1", "retry_of": 0}
    assert queued.system_attrs.get("fixed_params") == {"speed": 2}


def test_the_same_parameters_running_in_another_trial_are_seen():
    study = optuna.create_study()
    a = running(study, {"speed": 2})
    b = running(study, {"speed": 2})
    c = running(study, {"speed": 4})
    assert running_elsewhere(study, a) and running_elsewhere(study, b)
    assert not running_elsewhere(study, c)


def test_the_host_lock_creates_the_run_directory(tmp_path):
    run_dir = tmp_path / "runs" / "s"
    with host_lock(run_dir):
        assert (run_dir / ".recover.lock").exists()
