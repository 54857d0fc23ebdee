"""`kvtune proxy` in this process: the gRPC server on 127.0.0.1 in threads, SQLite behind it (no
process started). What Optuna's proxy lacks and kvtune adds: heartbeats relayed into the
database's own, stale trials named by the proxy and failed and re-queued by a worker, and a
plain proxy refused.

Here, not in tests/unit, because gRPC listens on and dials real ports (a free one bound, and a
port nothing listens on for the unreachable proxy): tests/unit opens no network socket."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import optuna
import pytest

from kvtune.errors import SpecError, StorageUnreachableError
from kvtune.launchers.process import free_port
from kvtune.tuner.store import storage
from kvtune.tuner.store.retry import unwrap
from kvtune.tuner.store.storage_proxy import HeartbeatRelay, StorageProxy, cached, open_backend

pytestmark = [
    pytest.mark.filterwarnings("ignore:Heartbeat of storage"),
    pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning"),
]


@pytest.fixture
def served(tmp_path):
    """A kvtune proxy over a SQLite file: (its grpc:// URL, the database file)."""
    db = tmp_path / "study.db"
    backend = cached(storage.rdb_storage(f"sqlite:///{db}", cls=HeartbeatRelay, heartbeat_s=1, grace_s=2))
    port = free_port()
    proxy = StorageProxy("sqlite", "127.0.0.1", port, backend=backend)
    proxy.start()
    yield f"grpc://127.0.0.1:{port}", db
    proxy.stop(grace_s=0)


@pytest.mark.parametrize(
    "url, address",
    [("grpc://db-host:13000", ("db-host", 13000)), ("grpc://10.0.0.5:9/", ("10.0.0.5", 9)), ("sqlite:///x.db", None)],
)
def test_a_grpc_url_is_a_host_and_a_port(url, address):
    assert storage.grpc_address(url) == address


@pytest.mark.parametrize(
    "url, says",
    [
        ("grpc://db-host", "grpc://HOST:PORT"),
        ("grpc://:13000", "grpc://HOST:PORT"),
        ("grpc://db-host:99999", "grpc://HOST:PORT"),
        ("grpc://db-host:port", "grpc://HOST:PORT"),
        ("grpc://user:pw@db-host:13000", "credentials"),
        ("grpc://db-host:13000/kvtune", "credentials"),
    ],
)
def test_a_malformed_grpc_url_is_refused_in_one_line(url, says):
    with pytest.raises(SpecError, match=says) as e:
        storage.grpc_address(url)
    assert "\n" not in str(e.value)


def test_the_proxy_refuses_to_front_another_proxy():
    with pytest.raises(SpecError, match="not another proxy"):
        open_backend("grpc://db-host:13000")


def test_no_proxy_listening_is_a_one_line_error():
    port = free_port()
    with pytest.raises(StorageUnreachableError, match=f"grpc://127.0.0.1:{port} is unreachable.*kvtune proxy"):
        storage.connect_proxy("127.0.0.1", port, 0.2)


def test_a_heartbeat_through_the_proxy_is_the_databases_heartbeat(served):
    url, db = served
    study = storage.open_study("s", url, ["minimize"], {"k": 1})
    client = unwrap(study._storage)  # under the retries (tuner/store/retry.py)
    assert isinstance(client, storage.ProxyClient) and client.heartbeat_s == 1  # the proxy's
    trial = study.ask()
    with storage.heartbeat(study, trial):
        pass
    with sqlite3.connect(db) as c:
        beats = {row[0] for row in c.execute("SELECT trial_id FROM trial_heartbeats")}
    assert trial._trial_id in beats
    assert storage.HEARTBEAT_ATTR not in storage.frozen(study, trial).system_attrs  # relayed, not stored


def test_a_worker_fails_and_requeues_a_trial_whose_heartbeat_stopped_through_the_proxy(served):
    url, db = served
    study = storage.open_study("s", url, ["minimize"], {"k": 1})
    trial = study.ask({"x": optuna.distributions.IntDistribution(1, 9)})
    with storage.heartbeat(study, trial):
        pass
    with sqlite3.connect(db) as c:  # the worker went silent an hour ago, by the database's clock
        c.execute("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-1 hour')")
    assert storage.ProxyClient._get_stale_trial_ids(study._storage, study._study_id) == [trial._trial_id]
    with storage.quiet_experimental():
        optuna.storages.fail_stale_trials(study)  # what a worker's recovery does first
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    retry = study.get_trials(deepcopy=False)[1]
    assert retry.params == trial.params and retry.system_attrs["failed_trial"] == trial.number


def test_a_worker_refuses_a_plain_optuna_proxy(tmp_path):
    """Behind it heartbeats would be stored and never read: a dead worker's trial stays RUNNING."""
    plain = optuna.storages.get_storage(storage.rdb_storage(f"sqlite:///{tmp_path / 'p.db'}"))
    port = free_port()
    server = storage.proxy_server(plain, "127.0.0.1", port)
    server.start()
    try:
        optuna.create_study(study_name="s", storage=plain)
        with pytest.raises(SpecError, match="not a `kvtune proxy`"):
            storage.load_study("s", f"grpc://127.0.0.1:{port}")
        reader = storage.load_study("s", f"grpc://127.0.0.1:{port}", read_only=True)  # a reader may
        assert reader.study_name == "s"
    finally:
        server.stop(0).wait()


def test_workers_share_a_study_through_the_proxy(served):
    """Four clients ask and tell at once: every trial is handed to exactly one."""
    url, _ = served
    storage.open_study("s", url, ["minimize"], {"k": 1})

    def work(_: int) -> list[int]:
        study = storage.load_study("s", url)
        told = []
        for _ in range(5):
            t = study.ask({"x": optuna.distributions.IntDistribution(1, 9)})
            study.tell(t, t.params["x"])
            told.append(t.number)
        return told

    with ThreadPoolExecutor(4) as pool:
        numbers = [n for told in pool.map(work, range(4)) for n in told]
    assert sorted(numbers) == list(range(20))


def test_a_warm_start_reads_and_queues_through_the_proxy(served):
    """The source's best config is queued in the new study and comes out first, marked as such."""
    from kvtune.jsonsafe import to_jsonable
    from kvtune.knobs import Candidate, Knob
    from kvtune.study.outcome import RUNS_KEY, TrialOutcome
    from kvtune.tuner.search.warmstart import enqueue_warm_start

    url, _ = served
    source = storage.open_study("a100", url, ["maximize"], {"k": 1})
    choices = optuna.distributions.CategoricalDistribution((1, 2, 4, 8))
    for n, (parallel, tput) in enumerate([(1, 10.0), (8, 40.0), (4, 30.0)]):
        o = TrialOutcome(
            number=n,
            candidate=Candidate(flags={"parallel": parallel}),
            argv=["srv"],
            env={},
            metrics={"output_throughput": tput},
            constraints={RUNS_KEY: -1.0},
            objective=tput,
            objectives=[tput],
        )
        source.add_trial(
            optuna.trial.create_trial(
                params={"parallel": parallel},
                distributions={"parallel": choices},
                value=tput,
                user_attrs={"outcome": to_jsonable(o)},
            )
        )
    target = storage.open_study("h100", url, ["maximize"], {"k": 1})
    labels = enqueue_warm_start(
        target, storage.load_study("a100", url), [Knob("parallel", "choices", choices=(1, 2, 4, 8))], top=1
    )
    assert labels == ["a100#1"]
    first = target.ask()
    assert storage.was_enqueued(target, first) and first.suggest_categorical("parallel", (1, 2, 4, 8)) == 8
    assert first.user_attrs["warm_start"] == "a100#1"
