"""Where a study lives: a run directory with Optuna's SQLite database, per-trial logs and
results, and the artifacts. Storage stays Optuna's own, so `optuna-dashboard sqlite:///...`
opens any kvtune study.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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


def open_study(name: str, url: str, direction: str, identity: dict) -> optuna.Study:
    """Create or resume the study. A resumed study must have the same identity (backend, model,
    workload, targets, objective, space): otherwise its trials would be compared unfairly."""
    storage = optuna.storages.RDBStorage(
        url, engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    )
    study = optuna.create_study(study_name=name, storage=storage, direction=direction,
                                load_if_exists=True)
    stored = study.user_attrs.get("identity")
    if stored is None:
        study.set_user_attr("identity", identity)
    elif json.dumps(stored, sort_keys=True) != json.dumps(identity, sort_keys=True):
        changed = sorted(k for k in identity if stored.get(k) != identity.get(k))
        raise SpecError(f"study {name!r} already exists with a different {', '.join(changed)}: "
                        f"use another --study name or the same settings to resume it")
    return study
