"""A study's storage that rides out a storage hiccup: every call retried on transient errors,
and a heartbeat that never dies.

A worker's study lives in a database or behind `kvtune proxy` on another host; either may
restart, drop a connection or roll a transaction back at any moment of a study that runs for
hours. `RetryingStorage` wraps the storage a study is opened on (tuner/store/storage.py's
`make_storage`, so every call the worker makes, Optuna's own included: ask, tell, attrs,
get_trials) and retries a call that failed transiently (tuner/store/connect.py's `transient`:
refused or reset connections, PostgreSQL starting up or shutting down, serialization failures,
gRPC UNAVAILABLE) with exponential backoff and jitter, for at most `RetryPolicy.total_s`
(KVTUNE_STORAGE_RETRY_S, default 120 s). Past that the call raises `StorageUnreachableError`
(exit 75: a scheduler retries the worker); any other error is raised at once.

`HeartbeatLoop` replaces Optuna's heartbeat thread, which dies on its first error: it beats every
interval, survives every error (one line when the storage stops answering, one when it answers
again) and stops only with its trial. After an outage, the heartbeats of every trial are old by
the outage's length although their workers live: `settling` tells recovery
(tuner/fleet/recovery.py) to wait one grace period before it calls a trial stale, so a live
worker's trial is never re-queued because the database was down.

Besides tuner/store/storage.py, the one module that touches Optuna's private heartbeat API
(`BaseHeartbeat`), for the same reason: Optuna has no public one.
"""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass
from typing import Any, Callable, Container, Sequence, TypeVar

import optuna
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled
from optuna.study import StudyDirection
from optuna.study._frozen import FrozenStudy
from optuna.trial import FrozenTrial, TrialState

from kvtune.clock import REAL_CLOCK, Clock
from kvtune.env_settings import env_number
from kvtune.errors import StorageUnreachableError
from kvtune.tuner.store.connect import redact, transient, unreachable

T = TypeVar("T")
log = logging.getLogger(__name__)  # no handler: Python's last resort prints warnings to stderr
# How long a storage call is retried before the worker gives up (exit 75: the scheduler retries it).
RETRY_S = env_number("KVTUNE_STORAGE_RETRY_S")  # kvtune/env_settings.py: a bad value is refused


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often a transient storage error is retried: waits of `first_s`,
    doubling (`factor`) up to `cap_s`, each shortened by a random share of up to `jitter` (so
    a fleet of workers does not come back in lockstep), until `total_s` would be passed."""

    total_s: float = RETRY_S
    first_s: float = 0.5
    factor: float = 2.0
    cap_s: float = 10.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The wait before retry number `attempt` (0: the first retry)."""
        full = min(self.cap_s, self.first_s * self.factor**attempt)
        return full * (1.0 - self.jitter * rng.random())


class Retrier:
    """Runs storage calls under a `RetryPolicy` for the storage at `url` (named, password
    masked, in its messages), on `clock`; remembers when the storage last failed, for
    `settling`. Thread-safe: the heartbeat reports its failures here too."""

    def __init__(
        self, url: str, policy: RetryPolicy | None = None, clock: Clock = REAL_CLOCK, rng: random.Random | None = None
    ):
        self.url, self.policy, self.clock = url, policy or RetryPolicy(), clock
        self.rng = rng or random.Random()
        # clock.monotonic() when the storage was last seen failing, or answering again after that
        self.last_outage: float | None = None
        self._lock = threading.Lock()

    def is_transient(self, e: BaseException) -> bool:
        return transient(e, self.url)

    def outage(self) -> None:
        """The storage did not answer just now (a call, a heartbeat), or answered again after
        not answering: the heartbeats of live workers may be old until they beat again."""
        with self._lock:
            self.last_outage = self.clock.monotonic()

    def settling(self, grace_s: float) -> bool:
        """The storage was down, or came back, less than `grace_s` ago: a heartbeat may be old
        because the storage was down, not because its worker died (every live worker beats
        within an interval of the storage answering again, well inside a grace period)."""
        last = self.last_outage
        return last is not None and self.clock.monotonic() - last < grace_s

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """`fn()`, retried while it fails transiently and the policy allows; `what` names the
        call in the two lines printed (the storage stopped answering; it answered again)."""
        began, attempt = self.clock.monotonic(), 0
        while True:
            try:
                result = fn()
            except Exception as e:
                if not self.is_transient(e):
                    raise
                self.outage()
                waited = self.clock.monotonic() - began
                wait = self.policy.delay(attempt, self.rng)
                if waited + wait > self.policy.total_s:
                    raise self.exhausted(e, waited) from e
                if attempt == 0:
                    log.warning(
                        "storage %s did not answer (%s): retrying for up to %.0f s",
                        redact(self.url),
                        what,
                        self.policy.total_s,
                    )
                self.clock.sleep(wait)
                attempt += 1
                continue
            if attempt:
                self.outage()
                log.warning(
                    "storage %s answered again after %.0f s (%s)",
                    redact(self.url),
                    self.clock.monotonic() - began,
                    what,
                )
            return result

    def exhausted(self, e: BaseException, waited: float) -> StorageUnreachableError:
        """The one-line error (exit 75) once the retries are spent."""
        return unreachable(e, self.url, retried_s=waited) or StorageUnreachableError(
            f"storage {redact(self.url)} is unreachable (retried for {waited:.0f} s): retry later"
        )


class HeartbeatLoop:
    """Beats for one running trial every `interval_s` until its `with` block ends, whatever the
    storage does meanwhile: an error is reported once (and to `retrier`, for `settling`), the
    next beat is tried an interval later, and the first that lands says so. `beat`: the
    storage's record_heartbeat, unretried (a beat is cheap and due again an interval later)."""

    def __init__(self, trial_id: int, beat: Callable[[int], None], interval_s: float, retrier: Retrier):
        self.trial_id, self.beat, self.interval_s, self.retrier = trial_id, beat, interval_s, retrier
        self.failing_since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kvtune-heartbeat-{trial_id}", daemon=True)

    def __enter__(self) -> HeartbeatLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def beat_once(self) -> bool:
        """One beat; whether it landed. Never raises: a heartbeat that dies with the storage
        would have the trial re-queued while it runs."""
        try:
            self.beat(self.trial_id)
        except Exception as e:
            self.retrier.outage()
            if self.failing_since is None:
                self.failing_since = self.retrier.clock.monotonic()
                log.warning(
                    "heartbeat of trial id %d: storage %s did not answer (%s): beating again every %g s",
                    self.trial_id,
                    redact(self.retrier.url),
                    type(e).__name__,
                    self.interval_s,
                )
            return False
        if self.failing_since is not None:
            self.retrier.outage()
            down = self.retrier.clock.monotonic() - self.failing_since
            log.warning("heartbeat of trial id %d: storage answered again after %.0f s", self.trial_id, down)
            self.failing_since = None
        return True

    def _run(self) -> None:
        while True:
            self.beat_once()
            if self._stop.wait(timeout=self.interval_s):
                return


class RetryingStorage(BaseStorage, BaseHeartbeat):
    """`inner` (Optuna's RDB storage behind its cache, or the gRPC proxy client) with every
    call retried by `retrier` (see the module docstring). A tell whose first attempt reached
    the storage before the connection broke finds the trial finished on its retry: when it is
    in the very state asked for, that was this call, and it succeeded."""

    def __init__(self, inner: BaseStorage, retrier: Retrier):
        self.inner, self.retrier = inner, retrier

    def __getattr__(self, name: str) -> Any:  # the inner storage's own extras (close, engine, ...)
        if name in ("inner", "retrier"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _retry(self, what: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.inner, what)
        return self.retrier.call(what, lambda: method(*args, **kwargs))

    # ---- studies ----------------------------------------------------------------------------
    def create_new_study(self, directions: Sequence[StudyDirection], study_name: str | None = None) -> int:
        return self._retry("create_new_study", directions, study_name)

    def delete_study(self, study_id: int) -> None:
        self._retry("delete_study", study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self._retry("set_study_user_attr", study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self._retry("set_study_system_attr", study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        return self._retry("get_study_id_from_name", study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self._retry("get_study_name_from_id", study_id)

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return self._retry("get_study_directions", study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self._retry("get_study_user_attrs", study_id)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self._retry("get_study_system_attrs", study_id)

    def get_all_studies(self) -> list[FrozenStudy]:
        return self._retry("get_all_studies")

    # ---- trials -----------------------------------------------------------------------------
    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        return self._retry("create_new_trial", study_id, template_trial)

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float, distribution: Any) -> None:
        self._retry("set_trial_param", trial_id, param_name, param_value_internal, distribution)

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        return self._retry("get_trial_id_from_study_id_trial_number", study_id, trial_number)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        tries = 0

        def attempt() -> bool:
            nonlocal tries
            tries += 1
            try:
                return self.inner.set_trial_state_values(trial_id, state, values)
            except optuna.exceptions.UpdateFinishedTrialError:
                if tries > 1 and _is_state(self.inner.get_trial(trial_id), state, values):
                    return True  # the attempt that broke had landed
                raise

        return self.retrier.call("set_trial_state_values", attempt)

    def set_trial_intermediate_value(self, trial_id: int, step: int, intermediate_value: float) -> None:
        self._retry("set_trial_intermediate_value", trial_id, step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._retry("set_trial_user_attr", trial_id, key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._retry("set_trial_system_attr", trial_id, key, value)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return self._retry("get_trial", trial_id)

    def get_all_trials(
        self, study_id: int, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        return self._retry("get_all_trials", study_id, deepcopy=deepcopy, states=states)

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        return self._retry("get_best_trial", study_id)

    def remove_session(self) -> None:
        self.inner.remove_session()

    # ---- heartbeats (Optuna's private BaseHeartbeat; see storage.heartbeat) -------------------
    def record_heartbeat(self, trial_id: int) -> None:
        self._retry("record_heartbeat", trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return self._retry("_get_stale_trial_ids", study_id)

    def get_heartbeat_interval(self) -> int | None:
        return self.inner.get_heartbeat_interval() if isinstance(self.inner, BaseHeartbeat) else None

    def get_heartbeat_stale_trial_callback(self) -> Callable[[optuna.Study, FrozenTrial], None] | None:
        return self.inner.get_heartbeat_stale_trial_callback() if isinstance(self.inner, BaseHeartbeat) else None


def _is_state(trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> bool:
    """`trial` is in `state` with `values` (None: any)."""
    return trial.state == state and (values is None or list(trial.values or []) == [float(v) for v in values])


def unwrap(storage: BaseStorage) -> BaseStorage:
    """The storage under the retries (for checks of its kind: the proxy client)."""
    return storage.inner if isinstance(storage, RetryingStorage) else storage


def heartbeat_interval(storage: BaseStorage) -> float | None:
    """Seconds between two heartbeats of a running trial on this storage; None for one without
    heartbeats (in-memory, SQLite without them)."""
    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        return None
    return storage.get_heartbeat_interval() or 1


def heartbeat_loop(storage: BaseStorage, trial_id: int) -> HeartbeatLoop | None:
    """A `HeartbeatLoop` for `trial_id` on a study's storage; None for one without heartbeats
    (in-memory, SQLite without them)."""
    if not is_heartbeat_enabled(storage):
        return None
    inner = unwrap(storage)
    retrier = storage.retrier if isinstance(storage, RetryingStorage) else Retrier("")
    assert isinstance(inner, BaseHeartbeat)
    interval = inner.get_heartbeat_interval() or 1
    return HeartbeatLoop(trial_id, inner.record_heartbeat, interval, retrier)


def settling(storage: BaseStorage, grace_s: float) -> bool:
    """The study's storage failed less than `grace_s` ago (see `Retrier.settling`)."""
    return isinstance(storage, RetryingStorage) and storage.retrier.settling(grace_s)


def stale_trial_ids(storage: BaseStorage, study_id: int, grace_s: float) -> list[int]:
    """The study's RUNNING trials whose heartbeat is silent past the grace period, by the
    storage's clock; none while the storage settles. `settling` is asked after the read, not
    before: a read that itself rode out an outage returns the heartbeats that outage silenced,
    and only the retry it took tells this worker so."""
    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        return []
    stale = storage._get_stale_trial_ids(study_id)
    return [] if settling(storage, grace_s) else stale
