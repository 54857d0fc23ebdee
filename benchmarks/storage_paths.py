"""Trials per hour and storage round trips per trial, PostgreSQL directly vs through `kvtune
proxy`, with 1, 4 and 16 workers whose trials cost nothing (benchmarks/workers.py --storage-paths).

Trials per hour count from the first trial's start to the last tell (the workers' Python
start-up is left out). A zero-cost worker makes the storage calls kvtune's loop makes per trial (tuner/loop.py), with no
server and no load: recovery (the stale-trial check and the running-trial scan), ask, the owner
attr, the running-elsewhere check, one heartbeat, the outcome attr and tell. So the figures are
the storage path's own ceiling. The sampler is Optuna's random one, which reads no trials: TPE's
own cost would hide the storage's. Round trips are counted where they happen:

- directly: each worker counts its SQL statements and commits (SQLAlchemy events): one round trip
  to PostgreSQL each;
- through the proxy: the proxy counts its RPCs (a gRPC server interceptor), one round trip from a
  worker each, and separately its own SQL to PostgreSQL (the proxy sits next to the database).
"""

from __future__ import annotations

import json
import os
import socket
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


def worker_main(url: str, study_name: str, trials: int, run_dir: str) -> int:
    """One zero-cost worker: kvtune's per-trial storage calls until `trials` are told."""
    from kvtune.launchers.process import process_start_ticks
    from kvtune.tuner.fleet import recovery, storage

    sql = count_sql()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = storage.load_study(study_name, url)
    study.sampler = optuna.samplers.RandomSampler(seed=os.getpid())
    host = socket.gethostname()
    owner = {"host": host, "pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())}
    told = 0
    while True:
        recovery.recover(study, Path(run_dir), host)
        if len(study.get_trials(deepcopy=False, states=(S.COMPLETE,))) >= trials:
            break
        t = study.ask(SPACE)
        t.set_user_attr("worker", owner)
        if recovery.running_elsewhere(study, t):
            study.tell(t, state=S.FAIL)
            continue
        with storage.heartbeat(study, t):
            value = t.params["x"]  # the trial: nothing
        t.set_user_attr("outcome", {"number": t.number, "value": value})
        study.tell(t, value)
        told += 1
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
    from kvtune.tuner.fleet import storage
    from kvtune.tuner.fleet.proxy import StorageProxy

    name = f"paths-{'proxy' if proxied else 'pg'}-w{workers}-{int(time.time() * 1000) % 10**8}"
    storage.open_study(name, postgres, ["minimize"], {"bench": name})
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
