"""A trial its worker left unfinished, queued again so that its config is measured once: one
interrupted by Ctrl-C (tuner/ask_tell.py), one an earlier run left RUNNING when it was killed
(the one-host coordinator, tuner/coordinator.py), one of a worker that died while others went on
(tuner/fleet/recovery.py). A worker is known by the pid and process start time it records on
each trial it runs, so a dead one is told from a live one on the same host at once."""

from __future__ import annotations

from typing import Any

import optuna

from kvtune.launchers.process import process_start_ticks


def requeue(study: optuna.Study, t: Any) -> None:
    """Queue `t`'s parameters again (keeping whether it was the baseline or a warm start).

    A trial killed before its parameters were suggested holds them only as the enqueued
    `fixed_params` (a retry, the baseline, a warm start): those are kept too."""
    attrs = {k: v for k, v in t.user_attrs.items() if k in ("baseline", "warm_start")}
    attrs["retry_of"] = t.user_attrs.get("retry_of", t.number)
    params = {**(t.system_attrs.get("fixed_params") or {}), **t.params}
    study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)


def fail_and_requeue(study: optuna.Study, t: optuna.trial.FrozenTrial) -> bool:
    """Fail the RUNNING trial `t` and queue its parameters again; False when another process
    finished it first (then it is that one's to re-queue)."""
    try:
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
    except (RuntimeError, ValueError, optuna.exceptions.UpdateFinishedTrialError):
        return False
    requeue(study, t)
    return True


def alive(owner: dict) -> bool:
    """Is the worker process recorded in a trial still the same running process?"""
    pid = owner.get("pid")
    if not pid:
        return False
    return process_start_ticks(int(pid)) is not None and process_start_ticks(int(pid)) == owner.get("start_ticks")


def requeue_left_behind(study: optuna.Study, host: str) -> None:
    """Before a study's only worker asks its first trial: every RUNNING trial whose worker on
    this host is gone (an earlier run killed mid-trial, or before it recorded itself) is failed
    and queued again."""
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        owner = t.user_attrs.get("worker") or {}
        if owner.get("host", host) == host and not alive(owner):
            fail_and_requeue(study, t)
