"""Recovering the trials of workers that died, so every config in the budget is measured once.

A worker that is SIGKILLed, loses its host or its network leaves a RUNNING trial behind. Two
mechanisms find it: Optuna's heartbeats (any storage, any host: a trial silent for the grace
period is failed and re-queued) and, on the same host, the worker's recorded pid and process
start time (a dead process is noticed at once, without waiting for the grace period). Recovery
on one host is serialized by a lock file in the run directory, which its workers share.
"""

from __future__ import annotations

import copy
import fcntl
import logging
import threading
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable

import optuna

from kvtune.clock import REAL_CLOCK
from kvtune.tuner.requeue import alive, fail_and_requeue
from kvtune.tuner.store.retry import heartbeat_interval, settling, stale_trial_ids
from kvtune.tuner.store.storage import GRACE_S

log = logging.getLogger(__name__)  # no handler: Python's last resort prints warnings to stderr


def recover(study: optuna.Study, run_dir: Path, host: str, suspects: set[int] | None = None) -> None:
    """Re-queue trials whose worker is gone, once each, so their configs are measured.

    - Heartbeats (all storages): a RUNNING trial silent for the grace period, whatever host
      ran it, is failed and re-queued (`fail_stale`).
    - Same host (`host`), at once: a RUNNING trial whose worker process is dead (kvtune was
      SIGKILLed, the machine rebooted) is failed and re-queued without waiting for the grace
      period. Ctrl-C re-queues its own trial as it stops (tuner/ask_tell.py).

    Within a grace period of the storage not answering this worker (tuner/store/retry.py's
    `settling`), no trial is called stale or orphaned: every heartbeat is then old by the
    outage, its worker alive and about to beat again. Only a heartbeat that stays silent for a
    grace period after the storage answers again re-queues its trial. `settling` is asked after
    each read it judges, since the read itself may be the call that rode the outage out.
    `suspects`: see `fail_stale`.
    """
    fail_stale(study, suspects)
    now = REAL_CLOCK.wall()
    with host_lock(run_dir):
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        silent_ok = not settling(study._storage, GRACE_S)
        for t in running:
            owner = t.user_attrs.get("worker") or {}
            # killed between ask and recording its worker: no owner, no heartbeat
            started = t.datetime_start
            orphaned = silent_ok and ownerless(t) and started is not None and now - started.timestamp() > GRACE_S
            if orphaned or (owner.get("host") == host and not alive(owner)):
                fail_and_requeue(study, t)  # (False: another worker got there first)


def fail_stale(study: optuna.Study, suspects: set[int] | None = None) -> None:
    """Fail the trials whose heartbeat is silent past the grace period and queue them again
    through the storage's stale-trial callback, as Optuna's `fail_stale_trials` does, but only
    with stale trials read while the storage did not settle (`stale_trial_ids`).

    `suspects` (a look that recurs every heartbeat interval, `RecoveryWatch`): a trial is
    failed only when the previous look found it stale too, one interval earlier; the set is
    updated to this look's. A live worker's beat that comes late (a loaded machine, a storage
    that answers again) is not a death; one that stays silent for another interval is."""
    storage = study._storage
    stale = stale_trial_ids(storage, study._study_id, GRACE_S)
    if suspects is not None:
        stale, seen = [i for i in stale if i in suspects], set(stale)
        suspects.clear()
        suspects.update(seen)
    for trial_id in stale:
        try:
            if not storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another worker failed it first: that one queues it again
        callback = storage.get_heartbeat_stale_trial_callback()  # type: ignore[attr-defined]
        if callback is not None:
            callback(study, without_owner(copy.deepcopy(storage.get_trial(trial_id))))


def without_owner(t: optuna.trial.FrozenTrial) -> optuna.trial.FrozenTrial:
    """`t` without the worker that ran it, for its retry (Optuna's callback copies every user
    attr): from the ask of the retry until its new worker records itself, the dead worker's
    record would make this host's recovery take the retry for the dead worker's trial, and
    fail and queue it once more."""
    t.user_attrs.pop("worker", None)
    return t


class RecoveryWatch:
    """Runs `recover` every `period_s` on a thread of its own while this worker's trial runs.

    Between trials a worker recovers anyway (tuner/fleet/shared.py), but trials last minutes:
    with every live worker inside one, a dead worker's trial would wait for the next to end,
    far past its grace period. Not on the heartbeat's thread: a recovery that rides out an
    outage must not hold a beat back. Never raises: a storage down for good ends the worker on
    its own calls (exit 75); this thread only says so once."""

    def __init__(self, recover_once: Callable[[], None], period_s: float):
        self.recover_once, self.period_s = recover_once, period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kvtune-recovery", daemon=True)
        self._failing = False

    def __enter__(self) -> RecoveryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(timeout=self.period_s):
            try:
                self.recover_once()
                self._failing = False
            except Exception as e:
                if not self._failing:
                    log.warning(
                        "recovery of dead workers' trials failed (%s): trying again every %g s", e, self.period_s
                    )
                self._failing = True


def watch(study: optuna.Study, run_dir: Path, host: str) -> AbstractContextManager[Any]:
    """A `RecoveryWatch` of `study` recovering every heartbeat interval (a stale trial is then
    re-queued within two intervals of its grace period ending: found stale on two looks in a
    row); nothing for a storage without heartbeats."""
    interval = heartbeat_interval(study._storage)
    if interval is None:
        return nullcontext()
    suspects: set[int] = set()
    return RecoveryWatch(lambda: recover(study, run_dir, host, suspects), float(interval))


def ownerless(t: Any) -> bool:
    """A RUNNING trial with no worker recorded: its process died between Optuna's ask and the
    next write (or is in that instant now, on some host). Only the grace period tells which."""
    return not t.user_attrs.get("worker") and t.datetime_start is not None


def running_elsewhere(study: optuna.Study, trial: optuna.trial.Trial) -> bool:
    """Another worker is measuring these very parameters right now: don't measure them twice
    (once it finishes, a later proposal of them is a duplicate and reuses its result).

    Any other running trial counts, whatever its number: a trial asked earlier may get its
    parameters only after this one checked, and then it is that one that sees this one. Two
    that see each other both step back and ask again."""
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    return any(t.number != trial.number and t.params == trial.params for t in running)


@contextmanager
def host_lock(run_dir: Path):
    """Serialize recovery among this host's workers (they share the run directory)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / ".recover.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
