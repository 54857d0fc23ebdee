"""Four workers on one study through `kvtune proxy` (Optuna's gRPC storage proxy) in front of a
real PostgreSQL; one is SIGKILLed mid-trial as if on another host, so only its heartbeat
(relayed by the proxy into the database's) can tell it died: the proxy fails its trial, Optuna's
retry re-queues it, and the study ends with every config measured once and no process left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest

from kvtune.launchers.process import free_port
from tests.e2e.test_workers_postgres import WIDE, check_exactly_once, driver, finished, frozen_mid_trial

pytestmark = pytest.mark.e2e
FAST_BEATS = {"KVTUNE_HEARTBEAT_S": "1", "KVTUNE_GRACE_S": "4"}


def marked_processes(mark: str) -> list[int]:
    """Live processes carrying this test's environment marker (never matched by name)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and f"KVTUNE_TEST_MARK={mark}".encode() in (d / "environ").read_bytes():
                if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(d.name))
        except OSError:
            continue
    return found


@pytest.fixture
def proxy(postgres_url):
    """`kvtune proxy` in front of the session's PostgreSQL: (its grpc:// URL, the marker its
    environment and the workers' carry, its PID). Ended by its PID after the test."""
    mark, port = uuid.uuid4().hex, free_port()
    env = {**os.environ, **FAST_BEATS, "KVTUNE_TEST_MARK": mark}
    p = subprocess.Popen(
        [sys.executable, "-m", "kvtune.cli", "proxy", "--storage", postgres_url, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert p.stdout is not None
        banner = p.stdout.readline()
        assert f"on 127.0.0.1:{port}" in banner, banner + p.stdout.read()
        yield f"grpc://127.0.0.1:{port}", mark, p.pid
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    assert p.returncode == 0 and "storage proxy stopped" in out, out
    assert marked_processes(mark) == []


@pytest.fixture
def started():
    """The workers a test starts; any still running at its end (a failed test) are killed by PID."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.communicate()


def test_killed_worker_trial_is_rerun_through_the_proxy(tmp_path, postgres_url, proxy, started):
    url, mark, proxy_pid = proxy
    env = {**FAST_BEATS, "KVTUNE_TEST_MARK": mark}
    first = driver(tmp_path, url, "proxied", *WIDE, env=env, requests=24)  # trials of 3-12 s
    started.append(first)
    time.sleep(3)  # let it create the study (spec + baseline)
    victim = driver(tmp_path, url, "proxied", "--join", "--slot", "3", env={**env, "KVTUNE_WORKER_HOST": "other-host"})
    started.append(victim)
    victim_trial = frozen_mid_trial(victim, url, "proxied", "other-host", tmp_path / "proxied")
    assert victim_trial is not None, "the victim never ran a trial"
    # four workers at once: two more join while the victim is stopped mid-trial; then it dies
    others = [driver(tmp_path, url, "proxied", "--join", "--slot", str(i), env=env) for i in (1, 2)]
    started.extend(others)
    victim.send_signal(signal.SIGKILL)
    victim.communicate()  # (closes its pipes)
    for p in [first, *others]:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    s, complete = finished(postgres_url, "proxied")  # read from the database itself
    workers = check_exactly_once(s, complete)
    assert len(workers) >= 2  # trials really were spread over processes
    assert s.trials[victim_trial].state == optuna.trial.TrialState.FAIL
    retried = [t for t in complete if t.system_attrs.get("failed_trial") == victim_trial]
    # re-queued by Optuna's retry (failed_trial): it was left RUNNING and its heartbeat stopped
    assert retried and retried[0].params == s.trials[victim_trial].params
    lost = [t for t in s.trials if t.state in (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)]
    assert lost == []
    deadline = time.monotonic() + 10  # the killed worker's server gets its parent-death signal
    while marked_processes(mark) != [proxy_pid] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marked_processes(mark) == [proxy_pid]  # no worker or server left; the proxy ends after
