"""The coordinator of a worker that shares its study with others (tuner/coordinator.py says
what the loop asks of it, and when).

Workers on one host or many ask trials of one study in shared storage. Each records itself on
the trial it runs and keeps its heartbeat alive, so a dead worker's trial is failed and queued
again by the others (tuner/fleet/recovery.py). They read one budget, the one the run that opened
the study stored in it (tuner/accounting.py); since workers that ask at the same moment can
overshoot it, the lowest-numbered running trials keep their places and the others step back, as
does a worker asked a config another one measures right now. When the budget is spent or the
space tried out while trials still run elsewhere, a worker that summarizes the study (the
process that created it, or the one elected to confirm it) or that a scheduler placed (no
creator waits on its study) stays and waits: one of those trials may die and be queued again,
and then it is this worker's to run. An extra worker leaves; the others finish the study.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

import optuna

from kvtune.clock import REAL_CLOCK, Clock
from kvtune.tuner import accounting
from kvtune.tuner.budget import Budget, StopReason
from kvtune.tuner.coordinator import spec_budget
from kvtune.tuner.fleet import recovery
from kvtune.tuner.store import storage

if TYPE_CHECKING:
    from kvtune.tuner.loop import TunerContext

WAIT_FOR_OTHERS_S = 1.0  # between two looks at trials running on other workers


class Shared:
    """One worker of a shared study. `summarizes`: this process measures the sentinels and
    confirms (the creator; a worker elected to confirm becomes one); `stays`: it waits for trials
    running elsewhere before it leaves (a worker a scheduler placed). `clock`: the waits'
    (virtual in tests)."""

    def __init__(self, ctx: "TunerContext", *, summarizes: bool, stays: bool = False, clock: Clock = REAL_CLOCK):
        self.study, self.run_dir, self.host = ctx.study, ctx.run_dir, str(ctx.where.worker.get("host"))
        self.summarizes, self.stays, self.clock = summarizes, stays, clock
        self._spec_budget = spec_budget(ctx)
        self._budget: Budget | None = None

    def begin(self) -> Budget:
        """Dead workers' trials queued again; the clock started by the first worker (a study set
        up for a scheduler starts it when its first worker does, not while the job queues); the
        stored budget, read once for the whole run."""
        self.after_trial()
        if not accounting.clock_started(self.study):
            accounting.begin_clock(self.study)
        self._budget = self.budget()
        return self._budget

    def budget(self) -> Budget:
        """The budget the run that opened the study last stored, else the spec's."""
        return accounting.load_budget(self.study, self._spec_budget)

    def step_back(self, trial: optuna.trial.Trial) -> str | None:
        """ "surplus" when trials running elsewhere take the rest of the budget (never a queued
        trial: it holds a config the study must measure), "in_flight_elsewhere" when another
        worker measures these very parameters now; None to run it."""
        if self._surplus(trial):
            return "surplus"
        if not trial.user_attrs.get("baseline") and recovery.running_elsewhere(self.study, trial):
            return "in_flight_elsewhere"
        return None

    def _surplus(self, trial: optuna.trial.Trial) -> bool:
        """Workers that ask at the same moment can overshoot the budget; the lowest-numbered
        running trials keep their places and the others step back. The budget counts measured
        configs only (tuner/accounting.py), as the loop does."""
        if storage.was_enqueued(self.study, trial):
            return False
        budget = self._budget or self.budget()
        running = sorted(
            t.number for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        )
        free = budget.trials - accounting.spent(self.study).measured
        return trial.number not in running[: max(free, 0)]

    @contextmanager
    def heartbeat(self, trial: optuna.trial.Trial) -> Iterator[None]:
        """The trial's heartbeat, beating while it runs (tuner/store/storage.py), and the
        recovery of dead workers' trials meanwhile (tuner/fleet/recovery.py's `watch`), so one
        is re-queued within its grace period while every live worker is inside a trial."""
        with storage.heartbeat(self.study, trial), recovery.watch(self.study, self.run_dir, self.host):
            yield

    def wait_for_others(self, stop: StopReason | str, counts: accounting.Spent) -> bool:
        """Wait a moment and look again while trials run elsewhere, unless this worker leaves
        them to the others or the trials budget is measured in full."""
        if not counts.running or not (self.summarizes or self.stays):
            return False
        if stop is StopReason.TRIALS and counts.measured >= (self._budget or self.budget()).trials:
            return False
        self.clock.sleep(WAIT_FOR_OTHERS_S)
        self.after_trial()
        return True

    def after_trial(self) -> None:
        """Trials of workers that died are failed and queued again (tuner/fleet/recovery.py)."""
        recovery.recover(self.study, self.run_dir, self.host)
