"""Workers on a real PostgreSQL ride out its restart and a restart of `kvtune proxy` in front of it:
every worker ends 0, no trial is lost or completed twice, and no live worker's trial is re-queued
for a heartbeat that was silent only because the storage was down. A worker frozen past the grace
period has its trial taken over and leaves it cleanly; a storage down for good ends every worker
with exit 75 in one line. Workers are kvtune.testing.driver processes on the fake launcher (real
processes, servers and client; no model), so the test is the storage's, not a backend's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Callable

import optuna
import pytest

from kvtune.launchers.process import free_port
from kvtune.tuner.store import storage
from tests.e2e.test_workers_postgres import WIDE, check_exactly_once, driver, frozen_mid_trial
from tests.postgres import PostgresServer

# each test runs a study of 3 workers (about a minute on 2 busy cores); the ceiling is above the
# 300 s each worker is given to end, so that one names the worker
pytestmark = pytest.mark.timeout(600)
State = optuna.trial.TrialState
# beats every second, stale after 4 s silent; a storage call retried for up to 90 s
FAST = {"KVTUNE_HEARTBEAT_S": "1", "KVTUNE_GRACE_S": "4", "KVTUNE_STORAGE_RETRY_S": "90"}
DOWN_S = 6.0  # longer than the grace period: every heartbeat is stale when the storage is back
# Beats 3 s apart (grace 4 s): for up to 3 s after the storage is back, a live worker's heartbeat
# is still stale, and a worker whose retry lands then must not call its trial stale.
SLOW_BEATS = {**FAST, "KVTUNE_HEARTBEAT_S": "3"}


@pytest.fixture(scope="module")
def pg():
    server = PostgresServer()
    yield server
    server.remove()


@pytest.fixture
def started():
    """The processes a test starts; any still running at its end (a failed test) killed by PID."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.communicate()


def wait_for(what: str, ok: Callable[[], bool], procs: list[subprocess.Popen], timeout_s: float = 100) -> None:
    """Until `ok()`; a worker of `procs` that ended meanwhile fails the test with its words."""
    deadline = time.monotonic() + timeout_s
    while not ok():
        for p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                raise AssertionError(f"a worker ended (status {p.returncode}) before {what}: {out}{err}")
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.3)


_READERS: dict[str, optuna.storages.BaseStorage] = {}


def trials(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    """The study's trials read from the database ([] before the first worker created it), through
    one storage per URL (a new one per look would leave a connection pool behind each time)."""
    if url not in _READERS:
        _READERS[url] = storage.make_storage(url)
    try:
        return optuna.load_study(study_name=study, storage=_READERS[url]).get_trials(deepcopy=False)
    except KeyError:
        return []


def owners(url: str, study: str) -> set[int]:
    return {int((t.user_attrs.get("worker") or {}).get("pid", 0)) for t in trials(url, study)} - {0}


def three_workers(tmp_path, url: str, study: str, started: list, env: dict) -> list[subprocess.Popen]:
    """The creator and two joiners, each holding or having run a trial (all three past joining,
    so a fault from now on is one mid-study); the study not finished yet."""
    first = driver(tmp_path, url, study, *WIDE, env=env, requests=48)  # trials of 6-24 s
    started.append(first)
    wait_for("the study is created", lambda: bool(trials(url, study)), [first])
    joiners = [
        driver(tmp_path, url, study, "--join", "--slot", str(slot), *WIDE, env=env, requests=48) for slot in (1, 2)
    ]
    started.extend(joiners)
    procs = [first, *joiners]
    wait_for("all three workers hold a trial", lambda: {p.pid for p in procs} <= owners(url, study), procs)
    return procs


def finish(procs: list[subprocess.Popen]) -> list[str]:
    """Every worker's stderr, once each has ended 0."""
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "Traceback" not in err, err
        errs.append(err)
    return errs


def check_survived(url: str, study: str, errs: list[str]) -> None:
    """Nothing lost, nothing twice, nothing re-queued: every FAIL is a worker stepping back."""
    s = optuna.load_study(study_name=study, storage=url)
    complete = [t for t in s.trials if t.state == State.COMPLETE]
    check_exactly_once(s, complete)  # every config measured once, the baseline once
    assert [t.number for t in s.trials if t.state in (State.RUNNING, State.WAITING)] == []
    requeued = [t.number for t in s.trials if "failed_trial" in t.system_attrs or "retry_of" in t.user_attrs]
    assert requeued == []  # no live worker's trial was taken for a heartbeat the outage silenced
    failed = [t for t in s.trials if t.state == State.FAIL]
    assert all(t.user_attrs.get("surplus") or t.user_attrs.get("in_flight_elsewhere") for t in failed)
    said = "\n".join(errs)
    assert "did not answer" in said and "answered again" in said  # the fault was met mid-study


def test_workers_ride_out_a_postgresql_restart(tmp_path, pg, started):
    procs = three_workers(tmp_path, pg.url, "pg-restart", started, SLOW_BEATS)
    before = len([t for t in trials(pg.url, "pg-restart") if t.state == State.COMPLETE])
    pg.stop()  # fast shutdown: every connection terminated, as an operator's restart does
    time.sleep(DOWN_S)
    pg.start()
    errs = finish(procs)
    check_survived(pg.url, "pg-restart", errs)
    assert len([t for t in trials(pg.url, "pg-restart") if t.state == State.COMPLETE]) > before


def kvtune_proxy(url: str, port: int) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-m", "kvtune.cli", "proxy", "--storage", url, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **FAST},
    )
    assert p.stdout is not None
    banner = p.stdout.readline()
    assert f"on 127.0.0.1:{port}" in banner, banner
    return p


def test_workers_ride_out_their_proxy_killed_and_started_again(tmp_path, pg, started):
    port = free_port()
    proxy = kvtune_proxy(pg.url, port)
    started.append(proxy)
    url = f"grpc://127.0.0.1:{port}"
    procs = three_workers(tmp_path, url, "proxy-restart", started, FAST)
    proxy.kill()  # SIGKILL: calls in flight broken, nothing flushed
    proxy.communicate()
    time.sleep(DOWN_S)
    again = kvtune_proxy(pg.url, port)  # the same address, as a supervisor restarts it
    started.append(again)
    errs = finish(procs)
    check_survived(pg.url, "proxy-restart", errs)
    again.send_signal(signal.SIGTERM)
    out, _ = again.communicate(timeout=30)
    assert again.returncode == 0 and "storage proxy stopped" in out, out


def test_a_worker_frozen_past_the_grace_period_leaves_its_taken_over_trial(tmp_path, pg, started):
    """SIGSTOP stops its heartbeat as a partition would: another worker fails and re-queues its
    trial; once the victim runs again, its tell finds the trial FAIL and it leaves it (exit 0,
    nothing stored twice), while the config is measured by the one that took it."""
    url = pg.url
    first = driver(tmp_path, url, "taken", *WIDE, env=FAST, requests=24)
    started.append(first)
    wait_for("the study is created", lambda: bool(trials(url, "taken")), [first])
    victim = driver(tmp_path, url, "taken", "--join", "--slot", "1", env={**FAST, "KVTUNE_WORKER_HOST": "other-host"})
    started.append(victim)
    number = frozen_mid_trial(victim, url, "taken", "other-host", tmp_path / "taken")
    assert number is not None, "the victim never ran a trial"
    wait_for("its trial is taken over", lambda: trials(url, "taken")[number].state == State.FAIL, [first], 60)
    victim.send_signal(signal.SIGCONT)
    finish([first, victim])
    s = optuna.load_study(study_name="taken", storage=url)
    check_exactly_once(s, [t for t in s.trials if t.state == State.COMPLETE])
    lost = s.trials[number]
    assert lost.state == State.FAIL and "outcome" not in lost.user_attrs  # the victim told it nothing
    retried = [t for t in s.trials if t.system_attrs.get("failed_trial") == number]
    assert [t.state for t in retried] == [State.COMPLETE] and retried[0].params == lost.params


def test_a_dead_workers_trial_is_re_queued_while_the_live_worker_is_inside_a_trial(tmp_path, pg, started):
    """The live worker is inside a long trial (the baseline, about 100 s) when a worker on
    another host dies mid-trial: its recovery watch, not the end of its trial, re-queues the dead
    worker's trial a few seconds after its grace period (4 s) ends."""
    url, name = pg.url, "mid-trial"
    survivor = driver(tmp_path, url, name, *WIDE, env=FAST, requests=200)  # speed 1: 200 x 1 s / 2
    started.append(survivor)
    wait_for("the study is created", lambda: bool(trials(url, name)), [survivor])
    victim = driver(
        tmp_path, url, name, "--join", "--slot", "1", *WIDE, env={**FAST, "KVTUNE_WORKER_HOST": "other-host"}
    )
    started.append(victim)
    number = frozen_mid_trial(victim, url, name, "other-host", tmp_path / name)
    assert number is not None, "the victim never ran a trial"
    held = {t.number for t in trials(url, name) if t.state == State.RUNNING} - {number}  # the survivor's
    victim.kill()
    victim.communicate()
    killed_at = time.monotonic()
    wait_for("the dead worker's trial is failed", lambda: trials(url, name)[number].state == State.FAIL, [survivor], 60)
    waited = time.monotonic() - killed_at
    now = {t.number: t for t in trials(url, name)}
    assert held and all(now[n].state == State.RUNNING for n in held), (held, waited)  # still inside its trial
    assert [t.system_attrs.get("failed_trial") for t in now.values() if t.state == State.WAITING] == [number]
    assert waited < 40, waited  # its grace period and a beat or two, not the survivor's 100 s trial


def test_a_storage_down_for_good_ends_every_worker_with_exit_75(tmp_path, pg, started):
    env = {**FAST, "KVTUNE_STORAGE_RETRY_S": "5"}
    procs = three_workers(tmp_path, pg.url, "down", started, env)
    pg.stop()
    try:
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 75, err
            last = err.strip().splitlines()[-1]
            assert last.startswith("error: storage postgresql://postgres@127.0.0.1") and "is unreachable" in last, err
            assert "(retried for" in last and "Traceback" not in err, err
    finally:
        pg.start()
