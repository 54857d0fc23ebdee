"""Wall time of a fixed fake-launcher study with 1, 2, 4 and 8 workers: the speed-up and the
storage overhead per trial.

    .venv/bin/python benchmarks/workers.py [--trials 24] [--storage postgresql://...]

Each trial starts a fake server (a real process) whose TTFT is 200 ms / speed (speed a
continuous knob in [1, 4], so every trial is a new config) and measures 24 requests, so a trial
takes one to three seconds and most of it is waiting, like a real server would make kvtune wait;
workers overlap that waiting. On a 2-core machine the workers' own processes (Python, the fake
servers, the load clients) compete for CPU from 4 workers up. Reference: the ideal speed-up is the worker
count (capped by the trial count); overhead = wall x workers / trials - mean time inside a trial
(asking, telling, recovery checks and storage round trips).

    .venv/bin/python benchmarks/workers.py --storage-paths --storage postgresql://... [--trials 200]

compares the storage paths instead: trials per hour and storage round trips per trial with 1, 4
and 16 zero-cost workers on PostgreSQL directly and through `kvtune proxy` (benchmarks/
storage_paths.py), each against direct PostgreSQL with as many workers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna


def run(workers: int, trials: int, storage: str | None, root: Path) -> tuple[float, float]:
    study = f"w{workers}-{int(time.time() * 1000) % 10**8}"
    url = storage or f"sqlite:///{root / study / 'study.db'}"
    (root / study).mkdir(parents=True, exist_ok=True)
    base = [
        sys.executable,
        "-m",
        "kvtune.testing.driver",
        "--runs-dir",
        str(root),
        "--storage",
        url,
        "--study",
        study,
        "--trials",
        str(trials),
        "--requests",
        "24",
        "--continuous",
    ]
    t0 = time.monotonic()
    first = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while True:  # wait until the first worker created the study
        try:
            optuna.load_study(study_name=study, storage=url)
            break
        except KeyError:
            time.sleep(0.1)
    others = [
        subprocess.Popen(
            [*base, "--join", "--slot", str(i)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for i in range(1, workers)
    ]
    for p in [first, *others]:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"worker failed: {err[-500:]}")
    wall = time.monotonic() - t0
    s = optuna.load_study(study_name=study, storage=url)
    done = [t for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == trials, (len(done), trials)
    inside = statistics.fmean((t.datetime_complete - t.datetime_start).total_seconds() for t in done)
    return wall, wall * workers / trials - inside


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--storage", default=None, help="default: a SQLite file per run")
    ap.add_argument("--storage-paths", action="store_true", help="PostgreSQL directly vs kvtune proxy")
    ap.add_argument("--workers", default="1,4,16", help="--storage-paths: worker counts, comma-separated")
    a = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if a.storage_paths:
        if not (a.storage or "").startswith("postgresql"):
            raise SystemExit("--storage-paths needs --storage postgresql://... (the database both paths use)")
        sys.path.insert(0, str(Path(__file__).parent))
        from storage_paths import compare

        compare(a.storage, a.trials, tuple(int(w) for w in a.workers.split(",")))
        return 0
    root = Path(tempfile.mkdtemp(prefix="kvtune-workers-"))
    print(f"{a.trials} fake-launcher trials, storage {'SQLite' if not a.storage else a.storage.split('@')[-1]}")
    print(f"{'workers':>7} {'wall s':>8} {'speed-up':>9} {'ideal':>6} {'overhead/trial':>15}")
    base_wall = None
    for w in (1, 2, 4, 8):
        wall, overhead = run(w, a.trials, a.storage, root)
        base_wall = base_wall or wall
        print(f"{w:>7} {wall:>8.1f} {base_wall / wall:>8.2f}x {min(w, a.trials):>5}x {overhead * 1000:>12.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
