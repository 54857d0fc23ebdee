"""The gRPC proxy's faults, survived by a study opened through it (real sockets, the proxy in this
process over a SQLite file): a proxy stopped and started again mid-call, and a database that does
not answer the proxy, which answers UNAVAILABLE (retried) rather than UNKNOWN (a crash)."""

from __future__ import annotations

import threading
import time

import grpc
import optuna
import pytest
import sqlalchemy.exc

from kvtune.launchers.process import free_port
from kvtune.tuner.store import storage
from kvtune.tuner.store.retry import unwrap
from kvtune.tuner.store.storage_proxy import HeartbeatRelay, StorageProxy, cached

pytestmark = [
    pytest.mark.filterwarnings("ignore:Heartbeat of storage"),
    pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning"),
]
PG = "postgresql://kvtune:s3cret@db-host:5432/kvtune"  # what the proxy says it fronts (never dialled)


def test_a_study_rides_out_its_proxy_stopped_and_started_again(tmp_path):
    db = tmp_path / "study.db"
    backend = cached(storage.rdb_storage(f"sqlite:///{db}", cls=HeartbeatRelay, heartbeat_s=1, grace_s=2))
    port = free_port()
    proxies = [StorageProxy("sqlite", "127.0.0.1", port, backend=backend)]
    proxies[0].start()
    study = storage.open_study("s", f"grpc://127.0.0.1:{port}", ["minimize"], {"k": 1})
    trial = study.ask({"x": optuna.distributions.IntDistribution(1, 9)})
    proxies[0].stop(grace_s=0)

    def start_again() -> None:  # 1.5 s later, on the same port (as a restarted `kvtune proxy`)
        time.sleep(1.5)
        proxies.append(StorageProxy("sqlite", "127.0.0.1", port, backend=backend))
        proxies[1].start()

    restarter = threading.Thread(target=start_again)
    began = time.monotonic()
    restarter.start()
    try:
        with storage.heartbeat(study, trial):  # the heartbeat rides it out too, not dying on its first error
            study.tell(trial, 1.0)  # UNAVAILABLE until the proxy is back: retried, then told once
        waited = time.monotonic() - began
        assert waited >= 1.0
        assert [(t.state, t.value) for t in study.get_trials()] == [(optuna.trial.TrialState.COMPLETE, 1.0)]
    finally:
        restarter.join()
        proxies[-1].stop(grace_s=0)


def test_a_trial_begun_through_a_proxy_gets_its_next_parameter_through_a_restarted_one(tmp_path):
    """The restarted proxy is a new process: its cache has never seen the worker's trial."""
    db, port = tmp_path / "study.db", free_port()

    def serve() -> StorageProxy:
        backend = cached(storage.rdb_storage(f"sqlite:///{db}", cls=HeartbeatRelay, heartbeat_s=1, grace_s=2))
        proxy = StorageProxy("sqlite", "127.0.0.1", port, backend=backend)
        proxy.start()
        return proxy

    first = serve()
    study = storage.open_study("s", f"grpc://127.0.0.1:{port}", ["minimize"], {"k": 1})
    trial = study.ask()
    trial.suggest_int("x", 1, 9)
    first.stop(grace_s=0)
    again = serve()
    try:
        trial.suggest_categorical("y", ["a", "b"])
        with pytest.raises(ValueError, match="Cannot set different distribution"):
            trial.suggest_int("y", 1, 9)  # the database checks what the cache would have
        study.tell(trial, 1.0)
        (told,) = study.get_trials()
        assert set(told.params) == {"x", "y"} and told.value == 1.0
    finally:
        again.stop(grace_s=0)


class DatabaseRestarting(optuna.storages.InMemoryStorage):
    """A backend whose next `outage` trial reads fail as PostgreSQL's do while it restarts."""

    outage = 0

    def get_all_trials(self, study_id, deepcopy=True, states=None):  # type: ignore[no-untyped-def]
        if self.outage > 0:
            self.outage -= 1
            orig = Exception("terminating connection due to administrator command")
            orig.sqlstate = "57P01"  # type: ignore[attr-defined]
            raise sqlalchemy.exc.OperationalError("SELECT trials", {}, orig) from orig
        return super().get_all_trials(study_id, deepcopy=deepcopy, states=states)


def test_a_database_that_does_not_answer_the_proxy_is_unavailable_to_the_worker(tmp_path):
    backend, port = DatabaseRestarting(), free_port()
    proxy = StorageProxy(PG, "127.0.0.1", port, backend=backend)
    proxy.start()
    try:
        study = optuna.create_study(study_name="s", storage=storage.make_storage(f"grpc://127.0.0.1:{port}"))
        study.ask()
        backend.outage = 1
        with pytest.raises(grpc.RpcError) as raw:  # the client under the retries sees why
            unwrap(study._storage).get_all_trials(study._study_id)
        assert raw.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        assert "kvtune:***@db-host" in raw.value.details() and "s3cret" not in raw.value.details()  # type: ignore[attr-defined]
        backend.outage = 3
        assert len(study.get_trials()) == 1  # the worker's call: retried until the database answers
        assert backend.outage == 0
    finally:
        proxy.stop(grace_s=0)
