"""A storage hiccup is ridden out: transient errors retried with capped, jittered backoff on an
injected clock (no real wait), every other error at once; retries spent is exit 75 in one line;
a tell whose first attempt landed is not told twice; the heartbeat survives the storage; and
recovery calls no trial stale while heartbeats are old only because the storage was down.

The storage is Optuna's in-memory one behind `FlakyStorage`, which fails its next N calls as a
PostgreSQL that is restarting does (the driver's error, wrapped by sqlalchemy): no socket."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from datetime import datetime, timedelta

import optuna
import pytest
import sqlalchemy.exc
from optuna.storages._heartbeat import BaseHeartbeat

from kvtune.errors import EXIT_TRANSIENT, StorageUnreachableError
from kvtune.launchers.process import process_start_ticks
from kvtune.testing.virtual_time import VirtualClock
from kvtune.tuner.fleet import recovery
from kvtune.tuner.store.retry import HeartbeatLoop, Retrier, RetryingStorage, RetryPolicy, settling, unwrap
from kvtune.tuner.store.storage import GRACE_S, MAX_RETRY

PG = "postgresql://kvtune:s3cret@db-host:5432/kvtune"
POLICY = RetryPolicy(total_s=120.0, first_s=0.5, factor=2.0, cap_s=10.0, jitter=0.5)


class DriverError(Exception):
    """A DB-API error as psycopg raises it, with its SQLSTATE."""

    def __init__(self, message: str, sqlstate: str | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate


def _wrapped(orig: DriverError, statement: str) -> sqlalchemy.exc.OperationalError:
    """sqlalchemy's error from the driver's, with the cause chain its `raise ... from` leaves."""
    e = sqlalchemy.exc.OperationalError(statement, {}, orig)
    e.__cause__ = orig
    return e


def restarting() -> sqlalchemy.exc.OperationalError:
    """What a call gets while PostgreSQL restarts: "the database system is starting up" (57P03)."""
    return _wrapped(DriverError("FATAL:  the database system is starting up", "57P03"), "SELECT 1")


def serialization_failure() -> sqlalchemy.exc.OperationalError:
    return _wrapped(DriverError("could not serialize access due to concurrent update", "40001"), "UPDATE trials")


class FlakyStorage(optuna.storages.InMemoryStorage, BaseHeartbeat):
    """Optuna's in-memory storage whose next `outage` outermost calls (the stale-trial read
    included) fail with `error()`; with heartbeats (`stale` names the trials whose heartbeat is
    silent) so recovery can be tested.
    `landed_then_broke`: the next tell is stored, then its connection breaks."""

    def __init__(self, error=restarting) -> None:
        super().__init__()
        self.outage, self.error, self.calls, self.depth = 0, error, 0, 0
        self.stale: list[int] = []
        self.beats: list[int] = []
        self.landed_then_broke = False

    def __getattribute__(self, name: str):
        attr = super().__getattribute__(name)
        storage_call = hasattr(optuna.storages.BaseStorage, name) or name == "_get_stale_trial_ids"
        if name.startswith("__") or not callable(attr) or not storage_call:
            return attr

        def call(*args, **kwargs):
            outermost = self.depth == 0
            if outermost:
                self.calls += 1
                if self.outage > 0:
                    self.outage -= 1
                    raise self.error()
            self.depth += 1
            try:
                result = attr(*args, **kwargs)
            finally:
                self.depth -= 1
            if outermost and name == "set_trial_state_values" and self.landed_then_broke:
                self.landed_then_broke = False
                raise ConnectionResetError(104, "Connection reset by peer")
            return result

        return call

    def record_heartbeat(self, trial_id: int) -> None:
        self.beats.append(trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return list(self.stale)

    def get_heartbeat_interval(self) -> int | None:
        return 1

    def get_heartbeat_stale_trial_callback(self):
        return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)


def wrapped(inner: FlakyStorage, clock: VirtualClock, url: str = PG) -> RetryingStorage:
    return RetryingStorage(inner, Retrier(url, POLICY, clock, random.Random(0)))


# ---- the policy ----------------------------------------------------------------------------
def test_waits_double_up_to_the_cap_and_jitter_only_shortens_them():
    rng = random.Random(1)
    full = [min(10.0, 0.5 * 2**i) for i in range(8)]
    drawn = [POLICY.delay(i, rng) for i in range(8)]
    assert full == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert all(f * 0.5 <= d <= f for d, f in zip(drawn, full))
    assert len(set(drawn)) == len(drawn)  # jittered: workers that failed together do not retry together


def test_a_call_that_fails_three_times_then_answers_returns_its_answer(caplog):
    clock, answers = VirtualClock(), iter([restarting(), ConnectionRefusedError(111, "refused"), restarting()])

    def call():
        e = next(answers, None)
        if e is not None:
            raise e
        return "told"

    retrier = Retrier(PG, POLICY, clock, random.Random(0))
    with caplog.at_level(logging.WARNING, logger="kvtune.tuner.store.retry"):
        assert retrier.call("tell", call) == "told"
    assert 0.5 * (0.5 + 1 + 2) <= clock.now <= 0.5 + 1 + 2  # three backoff waits, virtual
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "did not answer (tell)" in lines[0] and "answered again" in lines[1]
    assert all("s3cret" not in line for line in lines)
    assert retrier.settling(GRACE_S) and not (clock.advance(GRACE_S) or retrier.settling(GRACE_S))


def test_recovery_waits_a_grace_period_from_when_the_storage_answered_again():
    """The last failed attempt may be a 10 s backoff before the one that lands: the grace
    period counts from the answer, when the live workers' heartbeats start landing again."""
    clock, failures = VirtualClock(), [restarting() for _ in range(6)]

    def call():
        if failures:
            raise failures.pop()
        return "ok"

    retrier = Retrier(PG, POLICY, clock, random.Random(0))
    assert retrier.call("get_all_trials", call) == "ok" and clock.now > 10
    assert retrier.settling(4.0)
    clock.advance(4.0)
    assert not retrier.settling(4.0)


def test_a_storage_down_past_the_total_wait_is_exit_75_in_one_line():
    clock = VirtualClock()

    def call():
        raise restarting()

    with pytest.raises(StorageUnreachableError) as caught:
        Retrier(PG, POLICY, clock, random.Random(0)).call("ask", call)
    text = str(caught.value)
    assert caught.value.exit_code == EXIT_TRANSIENT == 75
    assert "is unreachable: FATAL:  the database system is starting up (retried for" in text
    assert "\n" not in text and "s3cret" not in text
    assert 100 < clock.now <= POLICY.total_s  # it waited about the total, never past it


@pytest.mark.parametrize(
    "error",
    [
        KeyError("trial_id"),
        optuna.exceptions.UpdateFinishedTrialError("finished"),
        sqlalchemy.exc.OperationalError("x", {}, DriverError("password authentication failed", "28P01")),
    ],
)
def test_an_error_a_retry_cannot_fix_is_raised_at_once(error):
    clock, calls = VirtualClock(), []

    def call():
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        Retrier(PG, POLICY, clock, random.Random(0)).call("tell", call)
    assert calls == [1] and clock.now == 0.0


def test_a_sqlite_file_is_never_retried():
    clock = VirtualClock()

    def call():
        raise restarting()

    with pytest.raises(sqlalchemy.exc.OperationalError):
        Retrier("sqlite:///study.db", POLICY, clock).call("tell", call)
    assert clock.now == 0.0


# ---- every storage call of a study ------------------------------------------------------------
@pytest.mark.parametrize("error", [restarting, serialization_failure])
def test_a_study_rides_out_outages_in_ask_attrs_tell_and_reads(error):
    inner, clock = FlakyStorage(error), VirtualClock()
    study = optuna.create_study(study_name="s", storage=wrapped(inner, clock))
    study.enqueue_trial({"x": 1.0})
    for i in range(4):
        inner.outage = 2  # the next two calls fail, whichever they are
        trial = study.ask()
        inner.outage = 2
        x = trial.suggest_float("x", 0.0, 4.0)
        inner.outage = 1
        trial.set_user_attr("worker", {"slot": 0})
        inner.outage = 3
        study.tell(trial, x * x)
        inner.outage = 1
        assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == i + 1
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 4
    assert study.trials[0].params == {"x": 1.0} and all(t.user_attrs["worker"] == {"slot": 0} for t in study.trials)
    assert clock.now > 0  # it did wait, on the virtual clock


def test_a_tell_that_landed_before_its_connection_broke_is_not_told_twice():
    inner, clock = FlakyStorage(), VirtualClock()
    study = optuna.create_study(storage=wrapped(inner, clock))
    trial = study.ask()
    inner.landed_then_broke = True
    study.tell(trial, 3.0)  # stored, then reset: the retry finds it COMPLETE with these values
    assert [(t.state, t.value) for t in study.trials] == [(optuna.trial.TrialState.COMPLETE, 3.0)]


def test_a_tell_of_a_trial_another_worker_failed_still_raises():
    inner, clock = FlakyStorage(), VirtualClock()
    storage = wrapped(inner, clock)
    study = optuna.create_study(storage=storage)
    trial = study.ask()
    storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)  # another's recovery
    inner.landed_then_broke = False
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.COMPLETE, [1.0])


def test_the_wrapper_passes_heartbeats_and_unwraps():
    inner = FlakyStorage()
    storage = wrapped(inner, VirtualClock())
    assert storage.get_heartbeat_interval() == 1 and unwrap(storage) is inner and unwrap(inner) is inner
    assert RetryingStorage(optuna.storages.InMemoryStorage(), Retrier(PG)).get_heartbeat_interval() is None


# ---- the heartbeat ----------------------------------------------------------------------------
def test_a_heartbeat_survives_a_storage_that_stops_answering(caplog):
    retrier, beats = Retrier(PG, POLICY, VirtualClock(), random.Random(0)), []
    outcomes = iter([True, False, False, False, True, True])

    def beat(trial_id: int) -> None:
        beats.append(trial_id)
        if not next(outcomes):
            raise restarting()

    loop = HeartbeatLoop(7, beat, 5.0, retrier)
    with caplog.at_level(logging.WARNING, logger="kvtune.tuner.store.retry"):
        landed = [loop.beat_once() for _ in range(6)]
    assert landed == [True, False, False, False, True, True] and beats == [7] * 6
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "did not answer" in lines[0] and "answered again" in lines[1]
    assert retrier.settling(GRACE_S)  # recovery is told the storage was down


def test_the_heartbeat_thread_keeps_beating_through_errors_until_its_trial_ends():
    retrier, beats, enough = Retrier(PG, POLICY, VirtualClock()), [], threading.Event()

    def beat(trial_id: int) -> None:
        beats.append(trial_id)
        if len(beats) >= 6:
            enough.set()
        if len(beats) <= 3:
            raise ConnectionRefusedError(111, "Connection refused")

    with HeartbeatLoop(3, beat, 0.0, retrier) as loop:  # interval 0: no real wait between beats
        assert enough.wait(timeout=30)
    assert len(beats) >= 6 and not loop._thread.is_alive()


# ---- recovery after an outage -------------------------------------------------------------------
def test_no_trial_is_stale_while_heartbeats_are_old_only_because_the_storage_was_down(tmp_path):
    inner, clock = FlakyStorage(), VirtualClock()
    storage = wrapped(inner, clock)
    study = optuna.create_study(storage=storage)
    trial = study.ask()
    trial.set_user_attr("worker", {"host": "other-host", "pid": 1})
    inner.stale = [trial._trial_id]  # its heartbeat is older than the grace period
    inner.outage = 2
    study.get_trials()  # this worker finds the storage down, then back
    assert settling(storage, GRACE_S)
    recovery.recover(study, tmp_path, "this-host")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.RUNNING]  # its worker may live
    clock.advance(GRACE_S)  # a grace period after the storage answered, still silent: dead
    recovery.recover(study, tmp_path, "this-host")
    states = [t.state for t in study.trials]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]  # re-queued once


def owned_elsewhere(study: optuna.Study, started: datetime | None = None, owner: dict | None = None) -> int:
    """A RUNNING trial of a worker on another host (`owner` None: one not recorded yet), begun
    at `started` (now); its number."""
    study.add_trial(
        optuna.trial.FrozenTrial(
            number=0,
            state=optuna.trial.TrialState.RUNNING,
            value=None,
            datetime_start=started or datetime.now(),
            datetime_complete=None,
            params={"speed": 2},
            distributions={"speed": optuna.distributions.CategoricalDistribution([1, 2])},
            user_attrs={} if owner is None else {"worker": owner},
            system_attrs={},
            intermediate_values={},
            trial_id=0,
        )
    )
    return study.trials[-1].number


@pytest.mark.parametrize("orphan", [False, True], ids=["heartbeat silent", "no worker recorded"])
def test_a_worker_that_meets_the_outage_only_in_recoverys_own_read_calls_no_trial_stale(tmp_path, orphan):
    """The worker had not met the outage before it began recovery (its last call landed before
    the storage went down); the read that recovery judges is the call that rides it out. The
    heartbeat (or the missing worker record) is then old by the outage, not by a death."""
    inner, clock = FlakyStorage(), VirtualClock()
    storage = wrapped(inner, clock)
    study = optuna.create_study(storage=storage)
    long_ago = datetime.now() - timedelta(seconds=GRACE_S + 5)
    number = owned_elsewhere(study, long_ago, None if orphan else {"host": "other-host", "pid": 1})
    if not orphan:
        inner.stale = [study.trials[number]._trial_id]
    assert not settling(storage, GRACE_S)  # nothing this worker did met the outage
    inner.outage = 3  # down as recovery begins: its first read retries until the storage is back
    recovery.recover(study, tmp_path, "this-host")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.RUNNING]  # its worker may live
    clock.advance(GRACE_S)  # silent for a grace period after the storage answered: dead
    recovery.recover(study, tmp_path, "this-host")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]


def test_a_dead_workers_trial_is_re_queued_while_the_live_worker_is_inside_its_trial(tmp_path):
    """No live worker is between trials: the one left runs a long trial, and its recovery watch
    (not its next trial's end) re-queues the trial whose heartbeat went silent."""
    inner, clock = FlakyStorage(), VirtualClock()
    study = optuna.create_study(storage=wrapped(inner, clock))
    mine = study.ask()
    mine.set_user_attr(
        "worker", {"host": "this-host", "pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())}
    )
    dead = owned_elsewhere(study, owner={"host": "other-host", "pid": 1})
    with recovery.RecoveryWatch(lambda: recovery.recover(study, tmp_path, "this-host"), 0.01):
        assert study.trials[dead].state == optuna.trial.TrialState.RUNNING  # beating, as far as known
        inner.stale = [study.trials[dead]._trial_id]  # silent past the grace period from now on
        deadline = time.monotonic() + 20
        while study.trials[dead].state == optuna.trial.TrialState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.01)
    states = [t.state for t in study.trials]
    S = optuna.trial.TrialState
    assert states == [S.RUNNING, S.FAIL, S.WAITING]  # this worker's own trial untouched, the dead one queued once


def test_a_recovery_watch_survives_a_storage_that_stops_answering(caplog):
    calls: list[int] = []

    def recover_once() -> None:
        calls.append(1)
        if len(calls) <= 3:
            raise StorageUnreachableError("storage postgresql://kvtune@db-host:5432/kvtune is unreachable")

    with caplog.at_level(logging.WARNING, logger="kvtune.tuner.fleet.recovery"):
        with recovery.RecoveryWatch(recover_once, 0.0):
            deadline = time.monotonic() + 20
            while len(calls) < 5 and time.monotonic() < deadline:
                time.sleep(0.01)
    assert len(calls) >= 5
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["recovery of dead workers' trials failed"]


def test_a_storage_without_heartbeats_watches_nothing(tmp_path):
    study = optuna.create_study()
    assert not isinstance(recovery.watch(study, tmp_path, "here"), recovery.RecoveryWatch)
    storage = wrapped(FlakyStorage(), VirtualClock())
    assert isinstance(recovery.watch(optuna.create_study(storage=storage), tmp_path, "here"), recovery.RecoveryWatch)


def test_a_stale_trials_retry_keeps_what_it_measures_and_not_the_dead_worker(tmp_path):
    """Optuna's retry copies every user attr: the dead worker's record on the retry would have
    this host's recovery fail it again between its ask and its new worker recording itself."""
    inner = FlakyStorage()
    study = optuna.create_study(storage=wrapped(inner, VirtualClock()))
    dead = owned_elsewhere(study, owner={"host": "this-host", "pid": 1, "start_ticks": -1})
    inner.set_trial_user_attr(study.trials[dead]._trial_id, "baseline", True)
    inner.stale = [study.trials[dead]._trial_id]
    recovery.fail_stale(study)
    retry = study.trials[-1]
    assert retry.state == optuna.trial.TrialState.WAITING and retry.system_attrs["failed_trial"] == dead
    assert retry.user_attrs == {"baseline": True}
    assert study.trials[dead].user_attrs["worker"]["host"] == "this-host"  # the failed trial keeps its record


def test_the_recovery_watch_fails_a_trial_found_stale_on_two_looks_in_a_row_only():
    """A beat that comes late once (a loaded machine) is no death: the watch fails a trial only
    when its look one interval earlier found it stale too."""
    inner = FlakyStorage()
    study = optuna.create_study(storage=wrapped(inner, VirtualClock()))
    other = owned_elsewhere(study, owner={"host": "other-host", "pid": 1})
    trial_id, suspects = study.trials[other]._trial_id, set()
    inner.stale = [trial_id]
    recovery.fail_stale(study, suspects)  # late, maybe
    assert study.trials[other].state == optuna.trial.TrialState.RUNNING and suspects == {trial_id}
    inner.stale = []  # it beat meanwhile: alive
    recovery.fail_stale(study, suspects)
    assert suspects == set()
    inner.stale = [trial_id]
    recovery.fail_stale(study, suspects)
    assert study.trials[other].state == optuna.trial.TrialState.RUNNING
    recovery.fail_stale(study, suspects)  # silent a whole interval more: dead
    states = [t.state for t in study.trials]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
