"""The cluster behind one seam: what code outside tuner/fleet/ reaches of the workers that
share a study, and the one place it picks their coordinator.

A study's only worker (`kvtune run` with no --storage and one worker) needs none of this: its
loop's coordinator is `Alone` (tuner/coordinator.py), which stores no budget and waits for
nobody. A run whose study others share (--storage, which workers on other hosts may join, or
--workers N) takes `coordinator_for`'s, publishes its budget before its workers start, spawns
them (`spawn`), and confirms through the election other processes take part in
(`confirm_study`). A study set up for a scheduler's workers is `set_up_study`'s; a worker
`join`s it, as the scheduler task (`scheduler_task`) it is; readers see a study in storage as
it stands (`read_study`, `read_set_up`).
"""

from __future__ import annotations

from functools import partial

import optuna

from kvtune.tuner import accounting
from kvtune.tuner.budget import Budget
from kvtune.tuner.coordinator import Alone, CoordinatorFactory
from kvtune.tuner.fleet.confirmer import Ending, confirm_study, ends_with_confirmation
from kvtune.tuner.fleet.setup import PLACEMENT_ATTR, SetUpStudy, read_set_up, set_up_study
from kvtune.tuner.fleet.shared import Shared
from kvtune.tuner.fleet.watch import Progress, read_study
from kvtune.tuner.fleet.workers import WorkerOptions, join, scheduler_task, spawn

__all__ = [
    "PLACEMENT_ATTR",
    "Ending",
    "Progress",
    "SetUpStudy",
    "WorkerOptions",
    "confirm_study",
    "coordinator_for",
    "ends_with_confirmation",
    "join",
    "publish_budget",
    "read_set_up",
    "read_study",
    "scheduler_task",
    "set_up_study",
    "shared",
    "spawn",
]


def shared(storage: str | None, workers: int) -> bool:
    """Whether other workers may share the run's study: it lives in a storage other hosts
    reach (--storage), or this host runs several workers (--workers N)."""
    return bool(storage) or workers > 1


def coordinator_for(storage: str | None, workers: int) -> CoordinatorFactory:
    """The coordinator of the process that runs a study (`kvtune run`): `Alone` when the study
    is its own, else a worker of a shared study that summarizes it (it waits for the others'
    trials, measures the sentinels and confirms)."""
    return partial(Shared, summarizes=True) if shared(storage, workers) else Alone


def publish_budget(study: optuna.Study, budget: Budget) -> None:
    """Store the run's budget in its shared study and start its clock, before any worker
    starts: workers, on this host or others, read both there (tuner/fleet/shared.py)."""
    accounting.store_budget(study, budget)
    accounting.begin_clock(study)
