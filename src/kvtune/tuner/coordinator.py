"""What the loop (tuner/loop.py) asks of the other workers of its study, at a few named points,
and the answer of a study's only worker.

A study may be searched by one process or by many, on one host or on many (tuner/fleet/). The
loop is the same for all of them: ask, run the trial, tell, until the budget is spent. What the
others change sits behind `Coordinator`:

- `begin`: before the first ask; the trials earlier runs or dead workers left RUNNING are queued
  again, the time budget's clock runs, and the budget the study runs under is known;
- `step_back`: after a trial is asked and its config suggested, whether to leave it to others
  (the budget is taken by trials running elsewhere, or another worker measures this config now);
- `heartbeat`: while a trial runs, so that other workers can tell this one is alive;
- `wait_for_others`: when the loop would stop, whether to look again after waiting for trials
  running elsewhere (one may die and be queued again: then it is this worker's to run);
- `after_trial`: after each trial told, trials of workers that died are queued again;
- `budget`: the budget the study runs under, for the confirmation after the search;
- `summarizes`: whether this process measures the baseline's sentinels and names the best.

`Alone` is the study's only worker: nothing runs elsewhere, so it never steps back or waits, and
its budget is the spec's own (it stores none in the study). The form for a study that workers
share is tuner/fleet/shared.py's; tuner/cluster_seam.py picks it.
"""

from __future__ import annotations

import socket
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Callable, Protocol

import optuna

from kvtune.tuner import accounting
from kvtune.tuner.budget import Budget, StopReason
from kvtune.tuner.requeue import requeue_left_behind

if TYPE_CHECKING:
    from kvtune.tuner.loop import TunerContext


class Coordinator(Protocol):
    """The other workers of a study, as the loop sees them (see the module docstring)."""

    summarizes: bool

    def begin(self) -> Budget: ...

    def budget(self) -> Budget: ...

    def step_back(self, trial: optuna.trial.Trial) -> str | None: ...

    def heartbeat(self, trial: optuna.trial.Trial) -> AbstractContextManager[Any]: ...

    def wait_for_others(self, stop: StopReason | str, counts: accounting.Spent) -> bool: ...

    def after_trial(self) -> None: ...


# Builds the coordinator of a Tuner from its context (study, run directory, spec).
CoordinatorFactory = Callable[["TunerContext"], Coordinator]


def spec_budget(ctx: "TunerContext") -> Budget:
    """The budget the spec asks for: --trials and --time-budget."""
    spec = ctx.what.spec
    return Budget(spec.trials, spec.time_budget_s)


class Alone:
    """The study's only worker: the spec's budget, nothing running elsewhere."""

    summarizes = True

    def __init__(self, ctx: "TunerContext"):
        self.study, self._budget = ctx.study, spec_budget(ctx)
        self.host = str(ctx.where.worker.get("host") or socket.gethostname())

    def begin(self) -> Budget:
        """A trial an earlier run left RUNNING (killed mid-trial) is queued again; the clock
        resumes from what earlier runs spent."""
        requeue_left_behind(self.study, self.host)
        accounting.begin_clock(self.study)
        return self._budget

    def budget(self) -> Budget:
        return self._budget

    def step_back(self, trial: optuna.trial.Trial) -> str | None:
        return None

    def heartbeat(self, trial: optuna.trial.Trial) -> AbstractContextManager[Any]:
        return nullcontext()

    def wait_for_others(self, stop: StopReason | str, counts: accounting.Spent) -> bool:
        return False

    def after_trial(self) -> None:
        pass
