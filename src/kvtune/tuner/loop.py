"""The ask -> pre-screen -> launch -> measure -> tell loop, shaped like Optuna's own
(`optuna.study._optimize._optimize_sequential`): ask a trial, run it, tell it, until the budget
is spent or there is nothing left to ask.

Every trial ends COMPLETE: a failed launch, a crash, a timeout or failed requests become a trial
whose constraints are violated (with the reason stored), never FAIL (samplers ignore FAIL trials
and would learn nothing) and never a fake good score. The baseline (the server's own defaults)
is queued first when the study is created. A trial interrupted by Ctrl-C, or left RUNNING by a
run that was killed, is failed and queued again, so the study re-runs it; finished trials are
never repeated. A measurement stops the moment a target can no longer hold
(tuner/trial/stopping.py): the trial is then infeasible like any other miss. The budget counts
launched configs, not asks (tuner/accounting.py).

Who does what: one trial's launch, measurement and score are the trial runner's
(tuner/trial/runner.py); one ask -> evaluate -> tell is tuner/ask_tell.py's; what the study holds
so far (the finished trials, the counts the budget is charged with) is the ledger's
(tuner/ledger.py, over the record store tuner/records.py). What other workers of the study
change (their heartbeats, the budget they share, a dead worker's trial queued again, waiting for
their trials) is the coordinator's, called at a few named points (tuner/coordinator.py; a
study's only worker has `Alone`, workers that share one have tuner/fleet/shared.py's). The
process that summarizes re-measures the baseline every `sentinel.SENTINEL_EVERY` measured trials
(tuner/sentinel.py), so drift shows as a series.
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
from kvtune.study.time_spent import SEARCH, StudyTime
from kvtune.tuner import accounting, confirmation, sentinel
from kvtune.tuner.anchor import Anchoring, runner_look, runner_measure
from kvtune.tuner.ask_tell import AskTell
from kvtune.tuner.budget import Budget, StopReason, confirmation_reserve_s, first_look_launches
from kvtune.tuner.coordinator import Alone, CoordinatorFactory
from kvtune.tuner.events import Callbacks
from kvtune.tuner.ledger import StudyLedger
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.remeasure import Remeasurer
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.runner import TrialRunner

__all__ = ["Callbacks", "Tuner", "TunerContext", "MAX_DUPLICATES_IN_A_ROW"]

MAX_DUPLICATES_IN_A_ROW = 25
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
    bench function, the study (SQLite file or in-memory for tests). `coordinate` builds what the
    loop asks of the study's other workers (tuner/coordinator.py): by default it has none."""

    def __init__(
        self,
        ctx: TunerContext,
        space: SearchSpace,
        callbacks: Callbacks | None = None,
        coordinate: CoordinatorFactory = Alone,
        clock: Clock = REAL_CLOCK,
    ):
        self.ctx = ctx
        self.clock = clock  # the pause after stepping back from another worker's trial
        self.cb = callbacks or Callbacks()
        self.coordinator = coordinate(ctx)
        self.records = TrialRecords(ctx.study)
        self.runner = TrialRunner(
            ctx.what, ctx.where, self.pid_file, on_phase=lambda n, p: self.cb.phase(n, p), clock=clock
        )
        self.ask_tell = AskTell(ctx, space, self.records, self.runner, self.cb, self.coordinator)
        self.ledger = StudyLedger(ctx.study, self.records, lambda: self.space.size(), ctx.what.spec.primary.key)
        self.budget_report: dict | None = None  # why the last run() stopped asking (results.json)
        self.sentinel_every = sentinel.SENTINEL_EVERY  # measured trials between baseline sentinels

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
        """results.json's study-level blocks: the sentinel, the verdict, the anchor, the load search
        (tuner/ledger.py)."""
        return self.ledger.report(self.sentinel_every)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> list[TrialOutcome]:
        """Ask, run and tell trials until the budget is spent (tuner/budget.py: --trials configs
        measured, the time budget spent or the asks cap reached) or nothing is left to ask;
        `budget_report` says why it stopped."""
        self._reap_leftover_servers()
        budget = self.coordinator.begin()
        duplicates = 0
        while True:
            stop = self._stop_reason(budget, duplicates)
            if stop is not None:
                if self.coordinator.wait_for_others(stop, self.ledger.counts()):
                    continue  # a trial that ran elsewhere may have died and been queued again
                break
            outcome = self.run_one()
            if outcome is None:  # another worker took the last trial, or runs this config now
                self.clock.sleep(WAIT_AFTER_STEP_BACK_S)
                continue
            duplicates = duplicates + 1 if outcome.duplicate_of is not None else 0
            self.coordinator.after_trial()
            if self.completed() < budget.trials:  # the end point is the confirmation's
                self.sentinel()
                self.anchor()
        self.budget_report = self._budget_report(stop, budget)
        return self.outcomes()

    def _stop_reason(self, budget: Budget, duplicates: int) -> StopReason | str | None:
        """Why not to ask another trial, or None. Trials running elsewhere count against the
        trials budget unless a queued trial waits (a config the study must measure). Nothing is
        left to ask when every config of a finite space was tried, or the sampler proposed
        `MAX_DUPLICATES_IN_A_ROW` measured configs in a row."""
        c = self.ledger.counts()
        in_flight = 0 if c.waiting else c.running
        reserve = self._confirmation_reserve_s(budget)
        stop = budget.stop_reason(c.measured, c.asked, accounting.elapsed_s(self.study), in_flight, reserve)
        if stop is None and not c.waiting and (duplicates >= MAX_DUPLICATES_IN_A_ROW or self.ledger.tried_all()):
            return accounting.EXHAUSTED
        return stop

    def _budget_report(self, stop: StopReason | str, budget: Budget) -> dict:
        """results.json's "budget": what the search spent, and why it stopped asking."""
        used, elapsed = self.ledger.counts(), accounting.elapsed_s(self.study)
        outcomes = self.outcomes() if stop is StopReason.ASKS else []
        culprits = accounting.blame(outcomes, self.launcher, self.spec.workload)
        reserve = self._confirmation_reserve_s(budget)
        message = accounting.stop_message(stop, budget, used, elapsed, culprits, reserve)
        return accounting.report(stop, budget, used, elapsed, message, reserve)

    def _confirmation_reserve_s(self, budget: Budget) -> float:
        """The time budget the search leaves the confirmation (tuner/budget.py): the verdict's
        first look at the search's mean hardware-seconds per launch; 0 without a time budget."""
        if budget.time_budget_s is None:
            return 0.0
        search = StudyTime.of(self.outcomes()).parts[SEARCH]
        launches = first_look_launches(self.spec.confirm_top, self.spec.confirm_pairs)
        return confirmation_reserve_s(search.spent.total_s, search.launches, launches)

    def _reap_leftover_servers(self) -> None:
        """Servers an earlier run of this study left behind (killed before it stopped them)."""
        for f in sorted(self.run_dir.glob("server.pid*.json")):
            note = reap_leftovers(f)
            if note:
                self.cb.phase(-1, note)

    def run_one(self) -> TrialOutcome | None:
        """Ask one trial and run it (tuner/ask_tell.py); None when this worker stepped back."""
        return self.ask_tell.run_one()

    # ---- the baseline sentinel (tuner/sentinel.py) ---------------------------------------------
    def sentinel(self, end: bool = False, time_left_s: float | None = None) -> dict | None:
        """Re-measure the baseline when a sentinel point is due (only in the process that
        summarizes: a multi-worker study measures each point once) and fits in `time_left_s`
        (None: no time budget). The run, or None."""
        measured = self.ledger.counts().measured
        if not self.coordinator.summarizes or not sentinel.due(self.study, measured, end, self.sentinel_every):
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

    # ---- the anchor of relative targets (tuner/anchor.py) ------------------------------------------
    def anchor(self, end: bool = False, time_left_s: float | None = None) -> None:
        """When the baseline's measurement was disturbed: measure the defaults again once the
        machine is quiet (between trials; before the verdict, waiting a little), so relative
        targets are anchored on quiet figures and earlier trials judged again; before the
        verdict, say so when none could be had. Within `time_left_s` (None: no time budget)."""
        if not self.coordinator.summarizes:
            return
        self.records.refresh()
        baseline = self.records.measured_baseline()
        anchoring = Anchoring(
            self.study,
            self.targets,
            self.spec.objective_specs,
            self.cb,
            runner_measure(self.runner, self.run_dir, self.cb, self.study),
            runner_look(self.runner),
        )
        if not anchoring.wanted(baseline):
            return
        assert baseline is not None
        if not end:
            budget_s = self.coordinator.budget().time_budget_s
            time_left_s = None if budget_s is None else budget_s - accounting.elapsed_s(self.study)
        need = confirmation.expected_s(baseline)
        if time_left_s is not None and need is not None and need > time_left_s:
            if not end:
                return
            anchoring.launches = 0  # no time for another launch: say so and leave it to the verdict
        (anchoring.before_verdict if end else anchoring.after_trial)(baseline, self.records.outcomes())
        self.records.refresh()

    def _remeasurer(self) -> Remeasurer:
        return Remeasurer(self.runner, self.records, self.cb, self.run_dir)

    # ---- confirmation ---------------------------------------------------------------------------
    def confirm(self) -> dict:
        """Re-measure the leaders on fresh servers before naming the best (see tuner/confirmation.py),
        within what is left of the time budget; the baseline's end-of-search sentinel first (it
        is the baseline's re-measurement there)."""
        self.records.refresh()
        budget_s = self.coordinator.budget().time_budget_s
        left = None if budget_s is None else budget_s - accounting.elapsed_s(self.study)
        decided, began = confirmation.VERDICT_ATTR in self.study.user_attrs, self.clock.monotonic()
        if not decided:
            self.anchor(end=True, time_left_s=left)  # relative targets on a quiet baseline, or said not
            self.sentinel(end=True, time_left_s=left)  # stored in the baseline's record: the first D
        if left is not None:
            left -= self.clock.monotonic() - began
        return confirmation.confirm(
            self.runner, self.records, self.cb, self.run_dir, left, self.launcher.server_defaults()
        )
