"""Several workers on one study in a real PostgreSQL: every trial done exactly once, the best
found, and a worker killed mid-trial has its trial re-run by another."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from kvtune.errors import SpecError
from kvtune.tuner.store import storage

pytestmark = pytest.mark.e2e
TRIALS = 12


def driver(tmp_path, url, study, *extra, env=None, requests=6):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kvtune.testing.driver",
            "--runs-dir",
            str(tmp_path),
            "--storage",
            url,
            "--study",
            study,
            "--trials",
            str(TRIALS),
            "--requests",
            str(requests),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def create(tmp_path, url, study):
    """The first process creates the study (spec + baseline) and runs trials too."""
    return driver(tmp_path, url, study)


def finished(url, study):
    s = optuna.load_study(study_name=study, storage=url)
    return s, [t for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE]


SPACE = 6  # the driver's fake space: speed 1/2/4 x bogus on/off


def check_exactly_once(s, complete):
    assert sum(1 for t in complete if t.user_attrs["outcome"]["baseline"]) == 1
    measured = [
        t
        for t in complete
        if t.user_attrs["outcome"]["duplicate_of"] is None and not t.user_attrs["outcome"]["baseline"]
    ]
    keys = [json.dumps(t.params, sort_keys=True) for t in measured]
    assert len(keys) == len(set(keys))  # no config measured twice: repeats are flagged duplicates
    # --trials counts measured configs; this space has fewer than TRIALS, so the study ends
    # once every config was measured (exactly once, across all workers)
    assert len(set(keys)) == min(SPACE, TRIALS - 1)
    workers = {t.user_attrs["worker"]["pid"] for t in complete}
    return workers


# TTFT 1000/500/250 ms for speed 1/2/4: gaps of 250 ms and more, far beyond the scheduling delay
# of three workers and PostgreSQL on two busy cores (at 200/100/50 ms a loaded CI machine once
# ranked speed 2 first).
WIDE = ("--base-ttft-ms", "1000")


def test_three_workers_share_a_study(tmp_path, postgres_url):
    first = driver(tmp_path, postgres_url, "share", *WIDE)  # creates the study (spec + baseline)
    time.sleep(3)  # let it create the study
    others = [driver(tmp_path, postgres_url, "share", "--join", "--slot", str(i), *WIDE) for i in (1, 2)]
    for p in [first, *others]:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    s, complete = finished(postgres_url, "share")
    workers = check_exactly_once(s, complete)
    assert len(workers) >= 2  # trials really were spread over processes
    best = min((t for t in complete if t.user_attrs["outcome"]["feasible"]), key=lambda t: t.value)
    assert best.user_attrs["outcome"]["candidate"]["flags"].get("speed") == 4  # TTFT 250 ms vs 500/1000


def test_killed_worker_trial_is_rerun_by_another(tmp_path, postgres_url):
    """The victim runs as if on another host, so only the heartbeat can tell it died."""
    env = {"KVTUNE_HEARTBEAT_S": "1", "KVTUNE_GRACE_S": "4"}
    first = driver(tmp_path, postgres_url, "kill", env=env, requests=24)  # trials of 1-3 s
    time.sleep(3)
    victim = driver(
        tmp_path, postgres_url, "kill", "--join", "--slot", "1", env={**env, "KVTUNE_WORKER_HOST": "other-host"}
    )
    try:
        victim_trial = frozen_mid_trial(victim, postgres_url, "kill", "other-host", tmp_path / "kill")
        assert victim_trial is not None, "the victim never ran a trial"
    finally:
        victim.kill()  # SIGKILL, stopped or not: mid-trial, its trial left RUNNING
        victim.communicate()
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    s, complete = finished(postgres_url, "kill")
    check_exactly_once(s, complete)
    failed = s.trials[victim_trial]
    assert failed.state == optuna.trial.TrialState.FAIL
    retried = [
        t
        for t in complete
        if t.system_attrs.get("failed_trial") == victim_trial or t.user_attrs.get("retry_of") == victim_trial
    ]
    assert retried and retried[0].params == failed.params


def running_on(url: str, study: str, host: str) -> set[int]:
    """The trials `host`'s worker holds RUNNING now (not those a rejected flag ends at once);
    none while the first worker has not created the study yet (a loaded machine starts it late)."""
    try:
        s = storage.load_study(study, url, read_only=True)
    except SpecError:
        return set()
    return {
        t.number
        for t in s.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        if (t.user_attrs.get("worker") or {}).get("host") == host and t.params.get("bogus") is False
    }


def launched(run_dir: Path, trials: set[int]) -> set[int]:
    """Those of `trials` whose server the runner launched (their folder exists): past the checks
    that end a trial at once."""
    return {n for n in trials if (run_dir / "trials" / f"{n:04d}").is_dir()}


def frozen_mid_trial(victim: subprocess.Popen, url: str, study: str, host: str, run_dir: Path) -> int | None:
    """Stop `victim` (SIGSTOP) while it measures a trial; that trial's number (None: it never did).

    A trial seen RUNNING is not necessarily one its worker will die in: a config measured already
    is told at once as a duplicate (never launched; ~2 s from ask to tell on a loaded 2-core
    machine, so a poll sees it RUNNING), one another worker measures right now is stepped back
    from, and a measurement may end between the look and the kill. So the victim is frozen
    first and looked at while it cannot move: a RUNNING trial whose server it launched is the
    trial its SIGKILL leaves behind, for the heartbeat to find. Otherwise it goes on (SIGCONT)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if launched(run_dir, running_on(url, study, host)):
            victim.send_signal(signal.SIGSTOP)
            frozen = sorted(launched(run_dir, running_on(url, study, host)))
            if frozen:
                return frozen[0]
            victim.send_signal(signal.SIGCONT)  # it finished meanwhile: look again
        time.sleep(0.2)
    return None


def test_a_worker_study_ends_confirmed_even_when_its_confirmer_dies(tmp_path, postgres_url):
    """Issue 31 item 2: a study set up for workers is confirmed by the one elected; SIGKILLed
    mid-confirmation, it is taken over by a worker that comes later (another host: only the
    claim's beat tells it died) and resumed from its runs; `kvtune show` names the verdict."""
    from kvtune.tuner.fleet import claims

    beats = {"KVTUNE_HEARTBEAT_S": "1", "KVTUNE_GRACE_S": "4"}  # a dead claim is failed after 12 s
    confirm = ("--confirm-top", "2", "--confirm-pairs", "3", *WIDE)  # the test driver's own flags
    setup = driver(tmp_path, postgres_url, "confirmed", "--setup-only", *confirm)
    assert setup.wait(timeout=120) == 0, setup.stderr.read() if setup.stderr else ""
    workers = {
        host: driver(
            tmp_path,
            postgres_url,
            "confirmed",
            "--join",
            "--slot",
            str(i),
            *confirm,
            env={**beats, "KVTUNE_WORKER_HOST": host},
        )
        for i, host in enumerate(("host-a", "host-b"))
    }
    holder = confirming(postgres_url, "confirmed", {p.pid for p in workers.values()})
    os.kill(holder, signal.SIGKILL)
    for p in workers.values():
        p.communicate(timeout=300)
    s = optuna.load_study(study_name="confirmed", storage=postgres_url)
    before = stored_runs(s)
    assert before and "verdict" not in s.user_attrs
    show = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "show", "confirmed", "--storage", postgres_url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert "not confirmed yet" in show.stdout and "kvtune confirm --storage" in show.stdout
    late = driver(
        tmp_path,
        postgres_url,
        "confirmed",
        "--join",
        "--slot",
        "2",
        *confirm,
        env={**beats, "KVTUNE_WORKER_HOST": "host-c"},
    )
    out, err = late.communicate(timeout=300)
    assert late.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["confirmation"] == "confirmed here"
    s = optuna.load_study(study_name="confirmed", storage=postgres_url)
    assert "verdict" in s.user_attrs and s.user_attrs["confirmed"]["by"]["host"] == "host-c"
    after = stored_runs(s)
    assert after[: len(before)] == before and len(after) > len(before)  # resumed from the dead one's runs
    side = optuna.load_study(study_name=claims.side_name("confirmed"), storage=postgres_url)
    states = [t.state for t in side.trials]
    assert optuna.trial.TrialState.RUNNING not in states and states.count(optuna.trial.TrialState.COMPLETE) == 1
    show = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "show", "confirmed", "--storage", postgres_url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert "Verdict: " in show.stdout and "not confirmed yet" not in show.stdout
    print(show.stdout)


def stored_runs(s: optuna.Study) -> list[dict]:
    runs = [
        {"trial": n, **r} for n, c in (s.user_attrs.get("confirmations") or {}).items() for r in c.get("runs") or []
    ]
    return sorted(runs, key=lambda r: r.get("at") or 0.0)


def confirming(url: str, study: str, pids: set[int]) -> int:
    """The pid of the worker that holds the confirmation, once it stored a run of it."""
    from kvtune.tuner.fleet import claims

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            side = optuna.load_study(study_name=claims.side_name(study), storage=url)
            s = optuna.load_study(study_name=study, storage=url)
        except KeyError:
            time.sleep(0.5)
            continue
        held = [t for t in side.trials if t.state == optuna.trial.TrialState.RUNNING]
        owners = [int(t.user_attrs.get("owner", {}).get("pid", 0)) for t in sorted(held, key=lambda t: t.number)]
        if stored_runs(s) and owners and owners[0] in pids:
            return owners[0]
        time.sleep(0.2)
    raise AssertionError("no worker started confirming")
