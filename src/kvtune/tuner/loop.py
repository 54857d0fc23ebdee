"""The ask -> pre-screen -> launch -> measure -> tell loop.

Every trial ends COMPLETE: a failed launch, a crash, a timeout or failed requests become a trial
whose constraints are violated (with the reason stored), never FAIL (samplers ignore FAIL trials
and would learn nothing) and never a fake good score. The baseline (the server's own defaults)
is queued first when the study is created. A trial interrupted by Ctrl-C, or lost with its
worker, is failed and queued again, so the study re-runs it; finished trials are never repeated.
A measurement stops the moment a target can no longer hold (tuner/trial/stopping.py): the trial
is then infeasible like any other miss. The budget counts launched configs, not asks
(tuner/accounting.py). One trial's launch, measurement and score are the trial runner's
(tuner/trial/runner.py); one ask -> evaluate -> tell, with the store's bookkeeping around it, is
tuner/ask_tell.py's; what the study holds so far (the finished trials, the counts the budget is
charged with, recovery) is the ledger's (tuner/ledger.py, over the record store
tuner/records.py). The process that summarizes re-measures the baseline every
`sentinel.SENTINEL_EVERY` measured trials (tuner/sentinel.py), so drift shows as a series.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import optuna

from kvtune.clock import REAL_CLOCK, Clock
from kvtune.launchers.base import Launcher
from kvtune.launchers.process import reap_leftovers
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.tuner import accounting, confirmation, sentinel
from kvtune.tuner.ask_tell import AskTell
from kvtune.tuner.budget import Budget, StopReason
from kvtune.tuner.events import Callbacks
from kvtune.tuner.fleet import recovery
from kvtune.tuner.ledger import StudyLedger
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.remeasure import Remeasurer
from kvtune.tuner.search.suggest import SearchSpace
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.runner import TrialRunner

__all__ = ["Callbacks", "Tuner", "TunerContext", "MAX_DUPLICATES_IN_A_ROW"]

MAX_DUPLICATES_IN_A_ROW = 25
WAIT_FOR_OTHERS_S = 1.0  # between two looks at trials running on other workers
WAIT_AFTER_STEP_BACK_S = 0.5  # after stepping back from a trial another worker took


@dataclass(frozen=True)
class TunerContext:
    """A study's collaborators: what is measured, where, and the study in storage (the Optuna
    study and the run directory with its per-trial folders)."""

    what: Subject
    where: Placement
    study: optuna.Study
    run_dir: Path


class Tuner:
    """Runs one study. Parts are injected through the context: the launcher (real or fake), the
    bench function, the study (SQLite file or in-memory for tests). `wait_for_others`: whether
    run() waits for trials running elsewhere (the process that summarizes does; an extra worker
    leaves when nothing is left to ask)."""

    def __init__(
        self,
        ctx: TunerContext,
        space: SearchSpace,
        callbacks: Callbacks | None = None,
        wait_for_others: bool = True,
        clock: Clock = REAL_CLOCK,
    ):
        self.ctx = ctx
        self.clock = clock  # the loop's waits for other workers (virtual in tests)
        self.cb = callbacks or Callbacks()
        self.wait_for_others = wait_for_others
        self.records = TrialRecords(ctx.study)
        self.runner = TrialRunner(ctx.what, ctx.where, self.pid_file, on_phase=lambda n, p: self.cb.phase(n, p))
        self.ask_tell = AskTell(ctx, space, self.records, self.runner, self.cb)
        self.ledger = StudyLedger(
            ctx.study,
            self.records,
            ctx.run_dir,
            str(ctx.where.worker["host"]),
            lambda: self.space.size(),
            ctx.what.spec.primary.key,
        )
        self.budget_report: dict | None = None  # why the last run() stopped asking (results.json)
        self.sentinel_every = sentinel.SENTINEL_EVERY  # measured trials between baseline sentinels
        # A study set up for a scheduler has no creator waiting on it: each of its workers stays
        # while trials run elsewhere, so a dead worker's trial is re-queued and re-run by them.
        self.stay_while_others_run = False

    @property
    def space(self) -> SearchSpace:
        """The search space the trials are asked over (held by the ask/tell step)."""
        return self.ask_tell.space

    @space.setter
    def space(self, space: SearchSpace) -> None:
        self.ask_tell.space = space

    # ---- the context, by name ---------------------------------------------------------------------
    @property
    def spec(self) -> StudySpec:
        return self.ctx.what.spec

    @property
    def launcher(self) -> Launcher:
        return self.ctx.what.launcher

    @property
    def targets(self) -> list[Target]:
        return self.ctx.what.targets

    @property
    def study(self) -> optuna.Study:
        return self.ctx.study

    @property
    def run_dir(self) -> Path:
        return self.ctx.run_dir

    @property
    def worker(self) -> dict:
        return self.ctx.where.worker

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"server.pid.{self.ctx.where.slot}.json"

    # ---- the study so far (tuner/ledger.py) -----------------------------------------------------
    def outcomes(self) -> list[TrialOutcome]:
        """Every finished trial (other workers' too), with its confirmation."""
        return self.ledger.outcomes()

    def completed(self) -> int:
        """Configs measured so far: what --trials counts."""
        return self.ledger.completed()

    def study_report(self) -> dict:
        """results.json's "sentinel" and "verdict" blocks (tuner/ledger.py)."""
        return self.ledger.report(self.sentinel_every)

    def _surplus(self, trial: optuna.trial.Trial) -> bool:
        return self.ask_tell.surplus(trial)

    def _spec_budget(self) -> Budget:
        return Budget(self.spec.trials, self.spec.time_budget_s)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> list[TrialOutcome]:
        """Ask, measure and tell until the budget is spent (tuner/budget.py): --trials
        configs measured, or the time budget spent, or the asks cap reached. The process that
        summarizes (`wait_for_others`) stores the budget and starts the clock in the study, so
        workers and a resumed study count the same way; `budget_report` says why it stopped."""
        for f in sorted(self.run_dir.glob("server.pid*.json")):
            note = reap_leftovers(f)
            if note:
                self.cb.phase(-1, note)
        self.ledger.recover()
        if self.wait_for_others:
            accounting.store_budget(self.study, self._spec_budget())
            accounting.begin_clock(self.study)
        elif not accounting.clock_started(self.study):  # set up for a scheduler: the first worker starts it
            accounting.begin_clock(self.study)
        budget = accounting.load_budget(self.study, self._spec_budget())
        stop = self._ask_until_spent(budget)
        outcomes = self.outcomes()
        used, elapsed = self.ledger.counts(), accounting.elapsed_s(self.study)
        culprits = accounting.blame(outcomes, self.launcher, self.spec.workload) if stop is StopReason.ASKS else []
        message = accounting.stop_message(stop, budget, used, elapsed, culprits) if stop else ""
        self.budget_report = accounting.report(stop, budget, used, elapsed, message)
        return outcomes

    def _ask_until_spent(self, budget: Budget) -> StopReason | str | None:
        """Run trials until `budget` says stop; why it stopped."""
        duplicates = 0
        while True:
            c = self.ledger.counts()
            stop = budget.stop_reason(c.measured, c.asked, accounting.elapsed_s(self.study))
            if stop is StopReason.TRIALS:
                return stop
            waits = self.wait_for_others or self.stay_while_others_run
            if stop is not None:  # time or asks: trials running elsewhere still finish
                if not (c.running and waits):
                    return stop
                self._wait_for_others()
                continue
            if c.waiting == 0 and self.ledger.tried_all():
                # one may yet die and be re-queued; one killed before it named its worker is
                # settled (after the grace period) before the summary calls the study finished
                orphans = self.wait_for_others and recovery.ownerless_running(self.study)
                if c.running and (self.stay_while_others_run or orphans):
                    self._wait_for_others()
                    continue
                return accounting.EXHAUSTED  # every config of the space was tried: nothing to ask
            if c.waiting == 0 and c.measured + c.running >= budget.trials:
                if not waits:
                    return None  # the rest of the budget is running on other workers
                self._wait_for_others()  # until they finish, or turn out dead and are re-queued
                continue
            outcome = self.run_one()
            if outcome is None:  # another worker took the last trial, or runs this config now
                self.clock.sleep(WAIT_AFTER_STEP_BACK_S)
                continue
            duplicates = duplicates + 1 if outcome.duplicate_of is not None else 0
            if duplicates >= MAX_DUPLICATES_IN_A_ROW:  # the sampler keeps proposing measured configs
                if not self._outwait_others(waits):
                    return accounting.EXHAUSTED
                duplicates = 0  # a trial that died elsewhere was re-queued: this worker runs it
            self.ledger.recover()
            if self.ledger.counts().measured < budget.trials:  # the end point is the confirmation's
                self.sentinel()

    # ---- the baseline sentinel (tuner/sentinel.py) ---------------------------------------------
    def sentinel(self, end: bool = False, time_left_s: float | None = None) -> dict | None:
        """Re-measure the baseline when a sentinel point is due (only in the process that
        summarizes: a multi-worker study measures each point once) and fits in `time_left_s`
        (None: no time budget). The run, or None."""
        measured = self.ledger.counts().measured
        if not self.wait_for_others or not sentinel.due(self.study, measured, end, self.sentinel_every):
            return None
        self.records.refresh()
        baseline = self.records.measured_baseline()
        if baseline is None or baseline.duplicate_of is not None:
            return None
        need = confirmation.expected_s(baseline)
        if time_left_s is not None and need is not None and need > time_left_s:
            self.cb.phase(
                baseline.number,
                f"not re-measured: it took {need:.0f} s and {max(time_left_s, 0.0):.0f} s of the time budget is left",
            )
            return None
        return sentinel.measure(self._remeasurer(), self.study, baseline, measured, end)

    def _remeasurer(self) -> Remeasurer:
        return Remeasurer(self.runner, self.records, self.cb, self.run_dir)

    def _wait_for_others(self) -> None:
        self.clock.sleep(WAIT_FOR_OTHERS_S)
        self.ledger.recover()

    def _outwait_others(self, waits: bool) -> bool:
        """Before a worker that `waits` calls the space exhausted: while trials run on other
        workers, one may die and be re-queued, and a worker that left could not re-run it.
        Whether one was re-queued (then it is this worker's to run)."""
        while waits:
            c = self.ledger.counts()
            if c.waiting:
                return True
            if not c.running:
                return False
            self._wait_for_others()
        return False

    def run_one(self) -> TrialOutcome | None:
        """Ask one trial and run it (tuner/ask_tell.py); None when this worker stepped back."""
        return self.ask_tell.run_one()

    # ---- confirmation ---------------------------------------------------------------------------
    def confirm(self) -> dict:
        """Re-measure the leaders on fresh servers before naming the best (see tuner/confirmation.py),
        within what is left of the time budget; the baseline's end-of-search sentinel first (it
        is the baseline's re-measurement there)."""
        self.records.refresh()
        budget_s = accounting.load_budget(self.study, self._spec_budget()).time_budget_s
        left = None if budget_s is None else budget_s - accounting.elapsed_s(self.study)
        decided, began = confirmation.VERDICT_ATTR in self.study.user_attrs, self.clock.monotonic()
        if not decided:
            self.sentinel(end=True, time_left_s=left)  # stored in the baseline's record: the first D
        if left is not None:
            left -= self.clock.monotonic() - began
        return confirmation.confirm(
            self.runner, self.records, self.cb, self.run_dir, left, self.launcher.server_defaults()
        )
