"""Crash safety: SIGKILL a study at random moments, resume, and check the SQLite study:
no lost or duplicated finished trial, no corrupt database, no fake server left behind."""

import random
import signal
import sqlite3
import subprocess
import sys
import time

import optuna


def driver(runs, trials):
    """The study driver as a child; use it as a context manager, which closes its pipes."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kvtune.testing.driver",
            "--runs-dir",
            str(runs),
            "--study",
            "crash",
            "--trials",
            str(trials),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kill_at_random_points_then_resume(tmp_path):
    rng = random.Random(7)
    trials = 8
    for _ in range(6):
        with driver(tmp_path, trials) as p:
            time.sleep(rng.uniform(0.3, 2.5))
            p.send_signal(signal.SIGKILL)
            p.wait()
    with driver(tmp_path, trials) as done:
        out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err

    db = tmp_path / "crash" / "study.db"
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    study = optuna.load_study(study_name="crash", storage=f"sqlite:///{db}")
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    measured = [t for t in complete if t.user_attrs["outcome"]["duplicate_of"] is None]
    # none lost, none beyond the budget: the fake's 6 configs and the baseline are all measured
    # (7 < 8 trials, so the space runs out first; duplicates are free and do not count)
    assert len(measured) == 7
    assert sum(1 for t in complete if t.user_attrs["outcome"]["baseline"]) == 1
    numbers = [t.user_attrs["outcome"]["number"] for t in complete]
    assert numbers == [t.number for t in complete] and len(set(numbers)) == len(complete)
    # every trial a kill interrupted was failed and re-queued once, not silently dropped
    stale = [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert stale == []
    assert not list((tmp_path / "crash").glob("server.pid*.json"))
