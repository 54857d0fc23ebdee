"""Trials per hour and storage round trips per trial, PostgreSQL directly vs through `kvtune
proxy`, with 1, 4 and 16 workers whose trials cost nothing (benchmarks/workers.py --storage-paths).

Trials per hour count from the first trial's start to the last tell (the workers' Python
start-up is left out). A zero-cost worker is kvtune's own worker (tuner/fleet/workers.py `join`,
the loop of tuner/loop.py and tuner/ask_tell.py: recovery, the budget and surplus checks, ask,
the worker and hardware attrs, the record refreshes, the running-elsewhere check, the heartbeat,
the constraints, the outcome, tell, the session clock) with one part replaced: the measurement,
which returns fixed figures at once instead of launching a server and driving load. So every
storage call a real trial makes is made and counted, and the figures are the storage path's own
ceiling. The sampler is Optuna's random one, which reads no trials: TPE's own cost would hide
the storage's. Round trips are counted where they happen:

- directly: each worker counts its SQL statements and commits (SQLAlchemy events): one round trip
  to PostgreSQL each;
- through the proxy: the proxy counts its RPCs (a gRPC server interceptor), one round trip from a
  worker each, and separately its own SQL to PostgreSQL (the proxy sits next to the database).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna

S = optuna.trial.TrialState
SPACE = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}


class Tally:
    """A thread-safe count (SQLAlchemy events and gRPC calls arrive on many threads)."""

    def __init__(self) -> None:
        self.value, self._lock = 0, threading.Lock()

    def add(self, *_: object, **__: object) -> None:
        with self._lock:
            self.value += 1


def count_sql() -> Tally:
    """SQL statements and commits of every SQLAlchemy engine in this process, from now on."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    tally = Tally()
    event.listen(Engine, "before_cursor_execute", tally.add)
    event.listen(Engine, "commit", tally.add)
    return tally


def zero_cost_measurement(runner):  # type: ignore[no-untyped-def]
    """`TrialRunner.run` without a server: the candidate's speed gives its TTFT at once (the fake
    launcher's 200 ms / speed, every request answered), then the trial is judged as a measured
    one is. Everything around it (the loop's and the store's storage calls) is kvtune's own."""

    def run(outcome, port, trial_dir, baseline, workload=None, early_stop=True):  # type: ignore[no-untyped-def]
        speed = float(outcome.candidate.flags.get("speed", 1.0))
        outcome.metrics = {
            "num_requests": 24,
            "completed": 24,
            "failed": 0,
            "error_rate": 0.0,
            "p95_ttft_ms": 200.0 / speed,
            "output_throughput": 10.0 * speed,
        }
        runner.judge(outcome, baseline)
        return outcome

    return run


def set_up(url: str, study_name: str, trials: int, run_dir: str) -> None:
    """The study, as `kvtune run --setup-only` stores it (the fake launcher's continuous speed
    knob: every trial a new config), no confirmation (its cost is not the storage's)."""
    import contextlib
    import io

    from kvtune.testing import driver

    argv = ["--setup-only", "--continuous", "--storage", url, "--study", study_name, "--trials", str(trials)]
    with contextlib.redirect_stdout(io.StringIO()):  # its JSON line is not the table's
        status = driver.main([*argv, "--runs-dir", run_dir])
    if status != 0:
        raise SystemExit(f"could not set up {study_name}")


def worker_main(url: str, study_name: str, trials: int, run_dir: str) -> int:
    """One zero-cost worker: kvtune's worker loop until the study's budget is told."""
    from kvtune.kinds import KnobKind
    from kvtune.knobs import Knob
    from kvtune.testing.fake_launcher import FakeLauncher
    from kvtune.tuner.fleet.workers import join
    from kvtune.tuner.trial.disturbance import unwatched

    sql = count_sql()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    launcher = FakeLauncher()
    launcher.knobs = (Knob("speed", KnobKind.FLOAT, low=1.0, high=4.0),)  # as the set-up's --continuous
    tuner = join(url, study_name, launcher=launcher, runs_dir=run_dir, monitor=unwatched)
    tuner.study.sampler = optuna.samplers.RandomSampler(seed=os.getpid())
    tuner.runner.run = zero_cost_measurement(tuner.runner)  # type: ignore[method-assign]
    told = len(tuner.run())
    print(json.dumps({"told": told, "sql": sql.value}))
    return 0


def count_rpcs() -> tuple[Tally, object]:
    """A tally and the gRPC server interceptor that adds every call the proxy serves to it."""
    import grpc

    tally = Tally()

    class Counting(grpc.ServerInterceptor):
        def intercept_service(self, continuation, details):
            tally.add()
            return continuation(details)

    return tally, Counting()


def one_run(workers: int, trials: int, postgres: str, proxied: bool, root: Path, sql: Tally) -> dict:
    """Wall time and round trips of `trials` zero-cost trials told by `workers` workers."""
    from kvtune.launchers.process import free_port
    from kvtune.tuner.store import storage
    from kvtune.tuner.store.storage_proxy import StorageProxy

    name = f"paths-{'proxy' if proxied else 'pg'}-w{workers}-{int(time.time() * 1000) % 10**8}"
    set_up(postgres, name, trials, str(root / name))
    (rpc, interceptor), proxy, url = count_rpcs(), None, postgres
    if proxied:
        port = free_port()
        proxy = StorageProxy(postgres, "127.0.0.1", port, interceptors=(interceptor,))
        proxy.start()
        url = f"grpc://127.0.0.1:{port}"
    sql_before = sql.value  # from here on, this process's SQL is the proxy's
    argv = [sys.executable, __file__, url, name, str(trials), str(root)]
    t0 = time.monotonic()
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(workers)]
    reports = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"zero-cost worker failed: {err[-800:]}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.monotonic() - t0
    proxy_sql = sql.value - sql_before
    if proxy is not None:
        proxy.stop()
    complete = storage.load_study(name, postgres, read_only=True).get_trials(deepcopy=False, states=(S.COMPLETE,))
    done = len(complete)
    # the study's own span, first start to last tell: the workers' interpreter start-up is not the storage's
    span = max(t.datetime_complete for t in complete) - min(t.datetime_start for t in complete)
    worker_trips = rpc.value if proxied else sum(r["sql"] for r in reports)
    return {
        "trials_per_hour": done / max(span.total_seconds(), 1e-6) * 3600,
        "wall_s": wall,
        "worker_trips_per_trial": worker_trips / done,
        "db_trips_per_trial": (proxy_sql if proxied else worker_trips) / done,
    }


def compare(postgres: str, trials: int, worker_counts: tuple[int, ...] = (1, 4, 16)) -> None:
    """Print the table: each row's trials per hour and round trips, and their ratio to direct
    PostgreSQL with the same worker count (the reference)."""
    import tempfile

    sql = count_sql()
    root = Path(tempfile.mkdtemp(prefix="kvtune-paths-"))
    print(f"{trials} zero-cost trials per run; reference: PostgreSQL directly, same worker count")
    print(f"{'workers':>7} {'path':>6} {'trials/h':>10} {'x ref':>6} {'worker RT/trial':>16} {'DB RT/trial':>12}")
    for w in worker_counts:
        ref = one_run(w, trials, postgres, False, root, sql)
        via = one_run(w, trials, postgres, True, root, sql)
        for path, r in (("pg", ref), ("proxy", via)):
            ratio = r["trials_per_hour"] / ref["trials_per_hour"]
            print(
                f"{w:>7} {path:>6} {r['trials_per_hour']:>10.0f} {ratio:>5.2f}x "
                f"{r['worker_trips_per_trial']:>16.1f} {r['db_trips_per_trial']:>12.1f}"
            )


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
