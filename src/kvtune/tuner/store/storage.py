"""Where a study lives: a run directory with Optuna's SQLite database, per-trial logs and
results, and the artifacts. Storage stays Optuna's own, so `optuna-dashboard sqlite:///...`
opens any kvtune study.
"""

from __future__ import annotations

import json
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat

from kvtune.env_settings import env_number
from kvtune.errors import SpecError, StorageUnreachableError
from kvtune.readable import check_name_lengths
from kvtune.tuner.store.connect import open_error, redact, waited  # noqa: F401 (redact: storage.redact, as callers read it)
from kvtune.tuner.store.retry import Retrier, RetryingStorage, heartbeat_loop, unwrap
from kvtune.tuner.store.storage_url import GRPC_PREFIX, check_port, check_sqlite_file, sqlite_file
from kvtune.writable import check_folder


def runs_root(explicit: str | None = None) -> Path:
    """--runs-dir, else $KVTUNE_RUNS_DIR, else ./kvtune-runs (--runs-dir '' is refused, and so is
    KVTUNE_RUNS_DIR set to nothing or blanks: either would silently mean the default, or a folder
    named ' ')."""
    if explicit is not None and not explicit.strip():
        raise SpecError("--runs-dir is empty: give a folder, or leave the flag out (default ./kvtune-runs)")
    if explicit:
        check_name_lengths(explicit, f"--runs-dir {explicit!r}")  # else is_dir() raises 'File name too long'
    from_env = os.environ.get("KVTUNE_RUNS_DIR")
    if not explicit and from_env is not None and not from_env.strip():  # set to nothing: not the default
        raise SpecError("KVTUNE_RUNS_DIR is set but empty: give a folder, or unset it (default ./kvtune-runs)")
    return Path(explicit or from_env or "kvtune-runs").expanduser()


def check_runs_root(explicit: str | None = None) -> Path:
    """The runs folder, checked before anything starts: a folder this user can write in or
    create (writable.check_folder), named by where it came from: `explicit` as the setting's
    key, runs_dir (`kvtune run` opens a refusal with --runs-dir when that flag gave it)."""
    source = "runs_dir" if explicit else "KVTUNE_RUNS_DIR" if os.environ.get("KVTUNE_RUNS_DIR") else "the runs folder"
    return check_folder(runs_root(explicit), source)


def run_dir(root: Path, study: str) -> Path:
    d = root / study
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # checked before anything started (check_runs_root); changed since
        raise SpecError(
            f"cannot make the study's folder {d}: {e.strerror}; give --runs-dir a folder you can write"
        ) from e
    return d


def sqlite_url(directory: Path) -> str:
    return f"sqlite:///{(directory / 'study.db').resolve()}"


# A running trial's worker writes a heartbeat this often; a trial silent for the grace period is
# stale (its worker died, wherever it ran) and Optuna re-queues it once per retry.
HEARTBEAT_S = int(env_number("KVTUNE_HEARTBEAT_S"))  # kvtune/env_settings.py: a bad value is refused
GRACE_S = int(env_number("KVTUNE_GRACE_S"))
MAX_RETRY = 3


@contextmanager
def quiet_experimental():
    """Heartbeats and stale-trial retry are long-stable Optuna features still labelled
    experimental; their warnings would only alarm users."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def make_storage(url: str, *, read_only: bool = False, on_wait: Callable[[str], None] | None = None) -> BaseStorage:
    """The study's storage: `grpc://host:port` is a `kvtune proxy` in front of the database (see
    `connect_proxy`); anything else is Optuna's RDB storage (SQLite file, PostgreSQL, MySQL) with
    heartbeats and retry of stale trials, so many workers on many hosts share one study and a dead
    worker's trial is re-run. `read_only`: a reader (`kvtune show --storage`) creates no tables.
    Opening fails at once (a storage that is down: exit 75), and a storage slow to answer is said
    to be waited on through `on_wait` (connect.py `waited`); every call after it is retried on
    transient errors (tuner/store/retry.py), so a worker rides out a database restart."""
    if not url.strip():  # named as given: the flag, or the environment variable it defaults to
        source = "KVTUNE_STORAGE" if os.environ.get("KVTUNE_STORAGE") == url else "--storage"
        raise SpecError(
            f"{source} must be a storage URL (postgresql://..., grpc://HOST:PORT, sqlite:///PATH), got {url!r}"
        )
    check_sqlite_file(url)
    check_port(url)
    address = grpc_address(url)
    if address is not None:
        inner: BaseStorage = waited(url, PROXY_WAIT_S, lambda: connect_proxy(*address), on_wait)
    else:  # Optuna's in-process cache in front, as optuna.create_study puts it on a bare RDBStorage
        inner = waited(
            url, CONNECT_TIMEOUT_S, lambda: optuna.storages.get_storage(rdb_storage(url, read_only=read_only)), on_wait
        )
    return RetryingStorage(inner, Retrier(url))


def rdb_storage(
    url: str,
    *,
    read_only: bool = False,
    cls: type[optuna.storages.RDBStorage] = optuna.storages.RDBStorage,
    heartbeat_s: int | None = None,
    grace_s: int | None = None,
) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage with kvtune's heartbeats (`cls`: the proxy's relaying subclass;
    `heartbeat_s`, `grace_s`: default HEARTBEAT_S, GRACE_S)."""
    try:
        with quiet_experimental():
            return cls(
                url,
                engine_kwargs=_engine_kwargs(url),
                skip_table_creation=read_only,
                heartbeat_interval=heartbeat_s or HEARTBEAT_S,
                grace_period=grace_s or GRACE_S,
                heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY),
            )
    except Exception as e:  # sqlalchemy's connection and URL errors, Optuna's wrapping of them
        raise open_error(e, url) from e


def check_reachable(url: str, on_wait: Callable[[str], None] | None = None) -> None:
    """`StorageUnreachableError` when the database or proxy at `url` does not answer (a SQLite
    file always does). For a run to call before it writes anything, its runs folder included:
    a storage that is down then costs a second and leaves nothing behind. Creates nothing there.
    One attempt, up to the connect timeout; a storage slow to answer is said to be waited on
    through `on_wait`, as every command that opens one says it (connect.py `waited`). A SQLite
    file is checked to be an Optuna study database, or new (`check_sqlite_file`)."""
    if url.startswith("sqlite"):
        check_sqlite_file(url)  # another program's database: refused before anything is written
        return
    check_port(url)
    address = grpc_address(url)
    waited(url, PROXY_WAIT_S if address is not None else CONNECT_TIMEOUT_S, lambda: _answer(url, address), on_wait)


def _answer(url: str, address: tuple[str, int] | None) -> None:
    """Connect to the storage at `url` once (a proxy at `address`), within its connect timeout."""
    if address is not None:
        connect_proxy(*address).close()
        return
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(url, **_engine_kwargs(url))
        try:
            with engine.connect():
                pass
        finally:
            engine.dispose()
    except Exception as e:
        raise open_error(e, url) from e


def _engine_kwargs(url: str) -> dict[str, Any]:
    """SQLAlchemy's engine options for the storage at `url`."""
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 60}}
    if url.startswith("postgresql"):  # a database that does not answer fails in seconds, not minutes
        return {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    return {}


CONNECT_TIMEOUT_S = int(env_number("KVTUNE_STORAGE_CONNECT_TIMEOUT_S"))


# ---- the gRPC storage proxy (`kvtune proxy`, tuner/store/storage_proxy.py) ---------------------------
# A worker's heartbeat crosses the proxy as this trial system attr; `kvtune proxy` records it as
# the database's own heartbeat instead of storing it (Optuna's proxy has no heartbeat call).
HEARTBEAT_ATTR = "kvtune:heartbeat"
# `kvtune proxy` adds this to every study's system attrs it serves (its heartbeat interval, grace
# period and the study's stale trials now): a worker refuses a plain Optuna proxy, behind which
# its heartbeats would be stored, never read, and a dead worker's trial never re-queued.
PROXY_ATTR = "kvtune:proxy"
PROXY_WAIT_S = env_number("KVTUNE_PROXY_WAIT_S")


def grpc_address(url: str) -> tuple[str, int] | None:
    """(host, port) of a `grpc://host:port` storage URL; None for any other URL."""
    if not url.startswith(GRPC_PREFIX):
        return None
    rest = url[len(GRPC_PREFIX) :].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if "@" in rest or "/" in rest or "?" in rest:
        raise SpecError(
            f"storage {url!r}: a proxy URL is grpc://HOST:PORT only (the proxy holds the database URL "
            f"and its credentials: `kvtune proxy --storage postgresql://...`)"
        )
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(f"storage {url!r}: write the proxy's address as grpc://HOST:PORT, e.g. grpc://db-host:13000")
    return host, int(port)


class ProxyClient(optuna.storages.GrpcStorageProxy, BaseHeartbeat):
    """Optuna's gRPC proxy client with kvtune's heartbeats, which Optuna's proxy has no call for:
    a running trial's heartbeat is a system attr that `kvtune proxy` records as the database's
    heartbeat, and the stale trials are a list the proxy adds to the study's system attrs (read
    by the database's clock). So a worker fails and re-queues a dead worker's trial in its own
    recovery (tuner/fleet/recovery.py), before it decides the study is done, as on PostgreSQL."""

    heartbeat_s: int = HEARTBEAT_S

    def record_heartbeat(self, trial_id: int) -> None:
        self.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, True)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        advert = self.get_study_system_attrs(study_id).get(PROXY_ATTR) or {}
        return [int(i) for i in advert.get("stale", [])]

    def get_heartbeat_interval(self) -> int | None:
        return self.heartbeat_s

    def get_heartbeat_stale_trial_callback(self) -> Any:
        return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)


def connect_proxy(host: str, port: int, wait_s: float | None = None) -> ProxyClient:
    """A client of `kvtune proxy` at host:port, once it answers within `wait_s` (default
    PROXY_WAIT_S); a one-line error otherwise."""
    wait_s = PROXY_WAIT_S if wait_s is None else wait_s
    try:
        with quiet_experimental():
            client = ProxyClient(host=host, port=port)
        client.wait_server_ready(timeout=wait_s)
    except ImportError as e:
        raise SpecError(f"storage grpc:// needs grpcio: {e.name or e} (pip install 'kvtune[proxy]')") from e
    except ConnectionError:
        raise StorageUnreachableError(
            f"storage grpc://{host}:{port} is unreachable: no storage proxy answered within {wait_s:g} s; "
            f"start it there (`kvtune proxy --storage postgresql://... --host 0.0.0.0 --port {port}`) or retry"
        ) from None
    return client


def check_proxy(study: optuna.Study, url: str) -> None:
    """A worker behind a proxy needs `kvtune proxy` (heartbeats relayed, stale trials re-queued);
    it takes the proxy's heartbeat interval, which the proxy's grace period was set against."""
    storage = unwrap(study._storage)
    if not isinstance(storage, ProxyClient):
        return
    advert = storage.get_study_system_attrs(study._study_id).get(PROXY_ATTR)
    if not isinstance(advert, dict):
        raise SpecError(
            f"{url} is not a `kvtune proxy` (a plain Optuna proxy stores heartbeats without reading "
            f"them, so a dead worker's trial would never be re-queued): run `kvtune proxy` there"
        )
    storage.heartbeat_s = int(advert.get("heartbeat_s", HEARTBEAT_S))


def proxy_server(storage: BaseStorage, host: str, port: int, threads: int = 32, interceptors: tuple = ()) -> Any:
    """Optuna's gRPC proxy service for `storage` on host:port, not started (a `grpc.Server`;
    `interceptors`: gRPC server interceptors, e.g. benchmarks/workers.py's RPC count).
    Built here rather than by `run_grpc_proxy_server`, which blocks with no way to stop it and
    lets gRPC's SO_REUSEPORT put a second proxy on a port already served; here a taken port is
    a RuntimeError."""
    import grpc
    from optuna.storages._grpc.auto_generated import api_pb2_grpc
    from optuna.storages._grpc.servicer import OptunaStorageProxyService

    server = grpc.server(
        ThreadPoolExecutor(max_workers=threads), interceptors=interceptors, options=[("grpc.so_reuseport", 0)]
    )
    api_pb2_grpc.add_StorageServiceServicer_to_server(OptunaStorageProxyService(storage), server)
    if server.add_insecure_port(f"{host}:{port}") == 0:  # older grpcio returns 0, newer raises
        raise RuntimeError(f"Failed to bind to address {host}:{port}")
    return server


def load_study(
    name: str, url: str, *, read_only: bool = False, on_wait: Callable[[str], None] | None = None
) -> optuna.Study:
    """An existing study; `read_only`: for a reader (any proxy will do); `on_wait`: says a
    storage slow to answer (`make_storage`). A study that must exist creates nothing: no SQLite
    file where none is, no tables in a database without them."""
    path = sqlite_file(url)  # a name too long for a file system refused there
    if path is not None and (not path.is_file() or path.stat().st_size == 0):
        why = "is a folder" if path.is_dir() else "is empty" if path.is_file() else "does not exist"
        raise SpecError(
            f"no study {name!r} in {url}: {path} {why}; give the study.db that "
            f"`kvtune run --storage ... --study {name}` wrote"
        )
    try:
        study = optuna.load_study(study_name=name, storage=make_storage(url, read_only=True, on_wait=on_wait))
    except KeyError:
        raise SpecError(
            f"no study {name!r} in {redact(url)}: start it with `kvtune run --storage ... --study {name}`"
        ) from None
    if not read_only:
        check_proxy(study, url)
    return study


def open_study(name: str, url: str, directions: list[str], identity: dict) -> optuna.Study:
    """Create or resume the study. A resumed study must have the same identity (backend, model,
    workload, targets, objective, space): otherwise its trials would be compared unfairly."""
    study = optuna.create_study(
        study_name=name,
        storage=make_storage(url),
        directions=directions,  # type: ignore[arg-type]
        load_if_exists=True,
    )
    check_proxy(study, url)
    stored = study.user_attrs.get("identity")
    if stored is None:
        study.set_user_attr("identity", identity)
    elif json.dumps(stored, sort_keys=True) != json.dumps(identity, sort_keys=True):
        changed = sorted(k for k in identity if stored.get(k) != identity.get(k))
        raise SpecError(
            f"study {name!r} already exists with a different {', '.join(changed)}: "
            f"use another --study name or the same settings to resume it"
        )
    return study


# ---- the only place kvtune touches Optuna's private API -------------------------------------
# Optuna offers no public way to (a) run a heartbeat thread for an ask/tell trial, (b) tell a
# trial that was enqueued (fixed parameters) from one the sampler proposed, (c) read a frozen
# copy of a trial by its handle. These helpers wrap the private names in one place (and
# tuner/store/retry.py, for Optuna's heartbeat interface, `BaseHeartbeat`);
# tests/unit/tuner/test_storage.py fails loudly if an Optuna upgrade moves them, and pyproject
# pins the Optuna major version they were checked against.


def heartbeat(study: optuna.Study, trial: optuna.trial.Trial):
    """A context manager that keeps `trial`'s heartbeat alive while it runs (a no-op for storages
    without heartbeats), so a dead worker's trial is detected and re-queued elsewhere. Not
    Optuna's heartbeat thread, which dies on its first error: tuner/store/retry.py's
    `HeartbeatLoop` survives a storage that stops answering and beats again when it answers."""
    loop = heartbeat_loop(study._storage, trial._trial_id)
    return loop if loop is not None else nullcontext()


def was_enqueued(study: optuna.Study, trial: optuna.trial.Trial) -> bool:
    """The trial carries parameters queued with `enqueue_trial` (baseline, retries, warm start)."""
    return "fixed_params" in study._storage.get_trial_system_attrs(trial._trial_id)


def queued_params(study: optuna.Study) -> list[dict[str, Any]]:
    """The parameters of the trials queued with `enqueue_trial` and not yet asked, in the order
    they will run (a queued trial's params are empty until it is asked: Optuna keeps them in its
    system attrs)."""
    waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    return [dict(study._storage.get_trial_system_attrs(t._trial_id).get("fixed_params") or {}) for t in waiting]


def frozen(study: optuna.Study, trial: optuna.trial.Trial) -> optuna.trial.FrozenTrial:
    """The stored state of an ask/tell trial (its params and user attrs as recorded)."""
    return study._storage.get_trial(trial._trial_id)


class TrialsWithParams:
    """The study as the GP sampler reads it, less the completed trials without the space's
    parameters (the baseline, pre-screened corners): tuner/samplers.py's BaselineAwareGP.
    The GP sampler reads trials through `Study._get_trials` (private; Optuna 5)."""

    def __init__(self, study: optuna.Study, search_space: dict[str, Any]):
        self._study, self._names = study, list(search_space)

    def _get_trials(self, *args: Any, **kwargs: Any) -> list[optuna.trial.FrozenTrial]:
        trials = self._study._get_trials(*args, **kwargs)
        return [t for t in trials if t.state != optuna.trial.TrialState.COMPLETE or set(self._names) <= set(t.params)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)
