"""A study set up for workers that a scheduler will place, and what its exports read back.

`kvtune run --setup-only` creates the study in shared storage and runs no trial: the spec (so a
worker needs only the URL and the name), the queued baseline, the budget, the GPUs per trial
(the scheduler file asks for that many per worker), the CPUs per trial (`--cpus-per-trial`, by
default this host's count: the space's threads go up to it, and every worker builds the same
space from it whatever its own host; see `workers.join`) and the model path as resolved here
(where a Kubernetes pod mounts the model's volume). Two things wait for the first worker: the
hardware fingerprint (the login node that set the study up is not where trials run) and the
time budget's clock (a job can wait in the queue for hours; that is not tuning time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import optuna

from kvtune.errors import SpecError
from kvtune.study.spec import StudySpec
from kvtune.tuner import accounting
from kvtune.tuner.assemble import Prepared, open_tuner
from kvtune.tuner.budget import Budget
from kvtune.tuner.store import storage

PLACEMENT_ATTR = "placement"


def set_up_study(prepared: Prepared, storage_url: str, gpus_per_trial: int = 0) -> optuna.Study:
    """Create (or re-open) the study with its spec, baseline, budget and GPUs per trial; no
    trial runs and no hardware is recorded."""
    tuner = open_tuner(prepared, storage_url=storage_url, record_hardware=False)
    spec = prepared.spec
    accounting.store_budget(tuner.study, Budget(spec.trials, spec.time_budget_s))
    model = prepared.launcher.model_path  # as resolved here: where a container mounts the model
    placement = {"gpus_per_trial": gpus_per_trial, "model_path": model, "cpus_per_trial": prepared.hardware["cpus"]}
    tuner.study.set_user_attr(PLACEMENT_ATTR, placement)
    return tuner.study


@dataclass(frozen=True)
class SetUpStudy:
    """What a scheduler file needs from a study in storage."""

    name: str
    spec: StudySpec
    gpus_per_trial: int
    cpus_per_trial: int | None  # None: set up by a kvtune that did not store it
    finished_trials: int
    model_path: str | None  # the model as the set-up resolved it (the spec may name none: the demo)


def read_set_up(study_name: str, storage_url: str, on_wait: Callable[[str], None] | None = None) -> SetUpStudy:
    """The stored study; a one-line `SpecError` when it is missing or was not made by kvtune
    (`on_wait`: says a storage slow to answer, storage.py `make_storage`)."""
    study = storage.load_study(study_name, storage_url, on_wait=on_wait)  # a missing study: a one-line SpecError
    if "spec" not in study.user_attrs:
        raise SpecError(f"study {study_name!r} was not created by kvtune (no stored spec)")
    placement = study.user_attrs.get(PLACEMENT_ATTR) or {}
    done = sum(1 for t in study.get_trials(deepcopy=False) if t.state.is_finished())
    return SetUpStudy(
        name=study_name,
        spec=StudySpec.from_dict(study.user_attrs["spec"]),
        gpus_per_trial=int(placement.get("gpus_per_trial", 0)),
        cpus_per_trial=stored_cpus_per_trial(placement),
        finished_trials=done,
        model_path=placement.get("model_path") or study.user_attrs["spec"].get("model"),
    )


def stored_cpus_per_trial(placement: dict) -> int | None:
    """The CPUs per trial a set-up stored (None: an older set-up, or a study not set up)."""
    n = placement.get("cpus_per_trial")
    return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 1 else None
