"""Soak: 200 short fake-launcher trials with random faults, and kvtune itself SIGKILLed now and
then; prints trials completed, faults survived, lost trials and orphans (both must be 0).

    .venv/bin/python benchmarks/soak.py [--trials 200] [--kills 5] [--seed 1]

Faults drawn per trial (about half the trials): a flag the server rejects (exit 2), HTTP 500 on
every request, a crash after the first request, a hang after the first token (requests time
out), a server that never becomes healthy (start-up timeout); on top of random SIGKILLs of the
tuning process. Reference: 0 lost trials, 0 orphans, every trial COMPLETE.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import optuna

FAULTS = ("bogus", "http500", "crash", "hang", "slow-start")


def marked_processes(mark: str) -> list[int]:
    """Live processes carrying our environment marker (never matched by name)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if f"KVTUNE_TEST_MARK={mark}".encode() in (d / "environ").read_bytes():
                if (d / "stat").read_text().split(")")[1].split()[0] != "Z":
                    found.append(int(d.name))
        except OSError:
            continue
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    mark = uuid.uuid4().hex
    runs = Path(tempfile.mkdtemp(prefix="kvtune-soak-"))
    cmd = [
        sys.executable,
        "-m",
        "kvtune.testing.driver",
        "--runs-dir",
        str(runs),
        "--study",
        "soak",
        "--trials",
        str(a.trials),
        "--faults",
        "--mark",
        mark,
        "--seed",
        str(a.seed),
    ]
    t0 = time.monotonic()
    kills = 0
    for _ in range(a.kills):
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(2, 15))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait()
    final = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.monotonic() - t0
    time.sleep(2)  # parent-death signals are asynchronous

    db = runs / "soak" / "study.db"
    integrity = sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0]
    study = optuna.load_study(study_name="soak", storage=f"sqlite:///{db}")
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    interrupted = [t for t in study.trials if t.state != optuna.trial.TrialState.COMPLETE]
    faulty = [
        t for t in complete if t.params.get("fault") in FAULTS and t.user_attrs["outcome"]["duplicate_of"] is None
    ]
    launched = sum(1 for t in complete if t.user_attrs["outcome"]["launched"])
    survived = [t for t in faulty if not t.user_attrs["outcome"]["feasible"]]
    lost = a.trials - len(complete)
    orphans = marked_processes(mark)
    for pid in orphans:  # clean up what we found (our own marked processes only)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    print(
        f"soak: {a.trials} trials, seed {a.seed}, {elapsed:.0f} s "
        f"({len(complete) / elapsed * 60:.0f} trials/min), final run rc={final.returncode}"
    )
    print(f"trials completed      {len(complete)} / {a.trials} ({launched} server launches)")
    print(f"faults injected       {len(faulty)} trials; survived (infeasible with a reason) {len(survived)}")
    print(f"kvtune SIGKILLed      {kills} times; interrupted trials re-run: {len(interrupted)}")
    print(f"lost trials           {lost}   (reference 0)")
    print(f"orphan servers        {len(orphans)}   (reference 0)")
    print(f"sqlite integrity      {integrity}")
    ok = lost == 0 and not orphans and integrity == "ok" and final.returncode == 0 and len(survived) == len(faulty)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sys.exit(main())
