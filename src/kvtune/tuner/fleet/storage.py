"""Where a study lives: a run directory with Optuna's SQLite database, per-trial logs and
results, and the artifacts. Storage stays Optuna's own, so `optuna-dashboard sqlite:///...`
opens any kvtune study.
"""

from __future__ import annotations

import json
import os
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna

from kvtune.errors import SpecError


def runs_root(explicit: str | None = None) -> Path:
    """--runs-dir, else $KVTUNE_RUNS_DIR, else ./kvtune-runs."""
    return Path(explicit or os.environ.get("KVTUNE_RUNS_DIR") or "kvtune-runs").expanduser()


def run_dir(root: Path, study: str) -> Path:
    d = root / study
    d.mkdir(parents=True, exist_ok=True)
    return d


def sqlite_url(directory: Path) -> str:
    return f"sqlite:///{(directory / 'study.db').resolve()}"


# A running trial's worker writes a heartbeat this often; a trial silent for the grace period is
# stale (its worker died, wherever it ran) and Optuna re-queues it once per retry.
HEARTBEAT_S = int(os.environ.get("KVTUNE_HEARTBEAT_S", "5"))
GRACE_S = int(os.environ.get("KVTUNE_GRACE_S", "20"))
MAX_RETRY = 3


@contextmanager
def quiet_experimental():
    """Heartbeats and stale-trial retry are long-stable Optuna features still labelled
    experimental; their warnings would only alarm users."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def make_storage(url: str) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage (SQLite file, PostgreSQL, MySQL) with heartbeats and retry of stale
    trials, so many workers on many hosts share one study and a dead worker's trial is re-run."""
    engine: dict[str, Any]
    if url.startswith("sqlite"):
        engine = {"connect_args": {"timeout": 60}}
    elif url.startswith("postgresql"):
        engine = {"pool_pre_ping": True}
    else:
        engine = {}
    try:
        with quiet_experimental():
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=engine,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY),
            )
    except ImportError as e:
        raise SpecError(
            f"storage {url.split(':', 1)[0]!r} needs a database driver: {e.name or e} "
            f"(for PostgreSQL: pip install 'kvtune[postgres]', i.e. psycopg)"
        ) from e
    except Exception as e:  # sqlalchemy's connection and URL errors
        raise SpecError(f"cannot open storage {redact(url)}: {str(e).splitlines()[0][:200]}") from e


def redact(url: str) -> str:
    """A storage URL without its password, for messages and results."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}" if ":" in creds else url
    return url


def load_study(name: str, url: str) -> optuna.Study:
    try:
        return optuna.load_study(study_name=name, storage=make_storage(url))
    except KeyError:
        raise SpecError(
            f"no study {name!r} in {redact(url)}: start it with `kvtune run --storage ... --study {name}`"
        ) from None


def open_study(name: str, url: str, directions: list[str], identity: dict) -> optuna.Study:
    """Create or resume the study. A resumed study must have the same identity (backend, model,
    workload, targets, objective, space): otherwise its trials would be compared unfairly."""
    study = optuna.create_study(
        study_name=name,
        storage=make_storage(url),
        directions=directions,  # type: ignore[arg-type]
        load_if_exists=True,
    )
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
# copy of a trial by its handle. These helpers wrap the private names in one place;
# tests/unit/tuner/test_storage.py fails loudly if an Optuna upgrade moves them, and pyproject
# pins the Optuna major version they were checked against.


def heartbeat(study: optuna.Study, trial: optuna.trial.Trial):
    """A context manager that keeps `trial`'s heartbeat alive while it runs (a no-op for storages
    without heartbeats), so a dead worker's trial is detected and re-queued elsewhere."""
    from optuna.storages._heartbeat import get_heartbeat_thread

    return get_heartbeat_thread(trial._trial_id, study._storage)


def was_enqueued(study: optuna.Study, trial: optuna.trial.Trial) -> bool:
    """The trial carries parameters queued with `enqueue_trial` (baseline, retries, warm start)."""
    return "fixed_params" in study._storage.get_trial_system_attrs(trial._trial_id)


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
