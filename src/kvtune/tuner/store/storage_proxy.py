"""`kvtune proxy`: Optuna's gRPC storage proxy in front of the study's database, so that many
workers hold one gRPC channel each to the proxy instead of a pool of database connections each.

Optuna's proxy passes storage calls through but has no heartbeat call: a worker behind a plain
Optuna proxy runs no heartbeat, and a dead worker's trial would stay RUNNING for ever. kvtune's
proxy adds the two missing halves on the server side, where the database is:

- a worker's heartbeat arrives as a trial system attr (`storage.HEARTBEAT_ATTR`, sent by
  `storage.ProxyClient`); the proxy records it as the database's own heartbeat (the database's
  clock, as for a worker on PostgreSQL directly) and stores no attr;
- a study's system attrs, as the proxy serves them, name its stale trials (by the database's
  clock); a worker's recovery (tuner/fleet/recovery.py) fails them and Optuna's retry callback
  re-queues each once per retry, exactly as a worker on PostgreSQL directly does, and before the
  worker decides the study is done. (A reaper in the proxy would race that decision: between its
  FAIL and its re-queue the study looks finished.) The same-host dead-process check and the
  re-queue of an orphaned trial in recovery.py use public calls only, and work through it.

Warm start, the budget, the clock and confirmations are study and trial attrs: they pass through.
A database that does not answer the proxy (restarting, a dropped connection) is answered to the
worker as gRPC UNAVAILABLE (`TransientAsUnavailable`), never as a bare UNKNOWN, so the worker's
retries (tuner/store/retry.py) ride out a database restart behind the proxy as in front of it.
The proxy has no TLS and no authentication: whoever reaches its port can write to the study.
"""

from __future__ import annotations

from typing import Any, Callable

import optuna
from optuna.storages import BaseStorage

from kvtune.errors import SpecError
from kvtune.tuner.store import storage, storage_url
from kvtune.tuner.store.connect import redact, transient, waited


class HeartbeatRelay(optuna.storages.RDBStorage):
    """The database behind the proxy: a worker's heartbeat attr becomes the database's heartbeat,
    and every study says that a `kvtune proxy` serves it (workers refuse a plain Optuna proxy)
    and which of its trials are stale now."""

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        if key == storage.HEARTBEAT_ATTR:
            self.record_heartbeat(trial_id)
            return
        super().set_trial_system_attr(trial_id, key, value)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        stale = self._get_stale_trial_ids(study_id)
        advert = {"heartbeat_s": self.heartbeat_interval, "grace_s": self.grace_period, "stale": stale}
        return {**super().get_study_system_attrs(study_id), storage.PROXY_ATTR: advert}


class TransientAsUnavailable:
    """A gRPC server interceptor: a call that failed because the database at `url` did not
    answer is aborted with UNAVAILABLE (which a worker retries) and the driver's first line,
    password masked; any other error goes on as Optuna's servicer raised it."""

    def __init__(self, url: str):
        self.url = url

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        import grpc

        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        call = handler.unary_unary

        def guarded(request: Any, context: Any) -> Any:
            try:
                return call(request, context)
            except Exception as e:
                if not transient(e, self.url):
                    raise
                context.abort(grpc.StatusCode.UNAVAILABLE, f"database {redact(self.url)} did not answer the proxy")

        return grpc.unary_unary_rpc_method_handler(
            guarded, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


class RestartedProxyCache(optuna.storages._CachedStorage):
    """Optuna's in-process cache in front of the database (as Optuna's proxy docs ask), for a
    proxy that may be a restarted one.

    Optuna's cache learns a trial when this process creates or lists it, and looks the trial up
    before it writes a parameter: a worker that created its trial through the proxy before a
    restart, and suggests the trial's next parameter through the new one, would be answered
    NOT_FOUND (a KeyError) and end. A trial the cache has not seen is written by the database
    itself, which checks the parameter's distribution as the cache would."""

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float, distribution: Any) -> None:
        with self._lock:
            seen = trial_id in self._trial_id_to_study_id_and_number
        if not seen:
            self._backend.set_trial_param(trial_id, param_name, param_value_internal, distribution)
            return
        super().set_trial_param(trial_id, param_name, param_value_internal, distribution)


def cached(backend: optuna.storages.RDBStorage) -> BaseStorage:
    """`backend` as the proxy serves it: behind a cache that survives the proxy's restart."""
    return RestartedProxyCache(backend)


def open_backend(url: str, on_wait: Callable[[str], None] | None = None) -> BaseStorage:
    """The proxied database, behind `cached`; `on_wait` says a database slow to answer
    (connect.py `waited`, as every command that opens a storage says it)."""
    if storage.grpc_address(url) is not None:
        raise SpecError(
            "kvtune proxy --storage takes the study's database (postgresql://...), not another proxy (grpc://)"
        )
    storage_url.check_port(url)  # a port out of range: bad input, not a database that does not answer
    storage_url.check_sqlite_file(url)
    return waited(url, storage.CONNECT_TIMEOUT_S, lambda: cached(storage.rdb_storage(url, cls=HeartbeatRelay)), on_wait)


class StorageProxy:
    """The gRPC server over the database; `start`, then `stop` (both return at once)."""

    def __init__(
        self,
        url: str,
        host: str,
        port: int,
        backend: BaseStorage | None = None,
        interceptors: tuple = (),
        on_wait: Callable[[str], None] | None = None,
    ):
        self.url, self.host, self.port = url, host, port
        self.backend = backend if backend is not None else open_backend(url, on_wait)
        try:
            guard = TransientAsUnavailable(url)
            self._server = storage.proxy_server(self.backend, host, port, interceptors=(guard, *interceptors))
        except ImportError as e:
            raise SpecError(f"kvtune proxy needs grpcio: {e.name or e} (pip install 'kvtune[proxy]')") from e
        except RuntimeError as e:  # grpc: "Failed to bind to address"
            raise SpecError(f"kvtune proxy cannot listen on {host}:{port} ({e}): pick another --port") from e

    def start(self) -> None:
        self._server.start()

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop serving: calls in flight get `grace_s` to finish."""
        self._server.stop(grace_s).wait()
