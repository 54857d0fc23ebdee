"""One trial, from Optuna's ask to its tell: the store's side of the loop (tuner/loop.py).

`AskTell.run_one` asks a trial, records its worker at once (a trial without one is an orphan,
tuner/requeue.py), suggests its config, steps back when the coordinator says so (other workers
hold the rest of the budget, or measure this config right now: tuner/coordinator.py), evaluates
it (a copy of an earlier measurement of the same config, a pre-screen rejection, or a launch
and measurement by the trial runner) and tells the outcome with its constraints. Ctrl-C fails
and re-queues the trial, so the study re-runs it. A trial taken over meanwhile (its heartbeat
went silent for a grace period, so another worker failed and re-queued it) is left as it is:
one line, no second tell, and the loop goes on. The loop decides how many trials to run; this
decides nothing.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import optuna

from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import Direction, FailureKind
from kvtune.knobs import Candidate
from kvtune.study.measured_noise import noise_of
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner import accounting
from kvtune.tuner.coordinator import Coordinator
from kvtune.tuner.events import Callbacks
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.requeue import requeue
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.tuner.store import storage
from kvtune.tuner.trial.runner import TrialRunner
from kvtune.tuner.trial.screening import Leader, leader_of

if TYPE_CHECKING:
    from kvtune.tuner.loop import TunerContext


class AskTell:
    """Ask, evaluate and tell one trial of `ctx.study` over `space` (see the module docstring)."""

    def __init__(
        self,
        ctx: "TunerContext",
        space: SearchSpace,
        records: TrialRecords,
        runner: TrialRunner,
        cb: Callbacks,
        coordinator: Coordinator,
    ):
        self.ctx, self.space, self.records, self.runner, self.cb = ctx, space, records, runner, cb
        self.coordinator = coordinator

    def run_one(self) -> TrialOutcome | None:
        """Ask one trial and run it; None when this worker stepped back (see the module
        docstring)."""
        with warnings.catch_warnings():  # ask/tell with heartbeats is what we mean to do
            warnings.filterwarnings("ignore", message="Heartbeat of storage")
            trial = self.ctx.study.ask()
            trial.set_user_attr("worker", self.ctx.where.worker)  # at once: a trial without one is an orphan
        baseline = bool(trial.user_attrs.get("baseline"))
        try:  # from the ask on: a SIGTERM (scancel, eviction) here must not leave it RUNNING
            trial.set_user_attr("hardware", self.ctx.where.hardware)
            self.records.refresh()  # other workers may have told trials since this one's last
            with self.coordinator.heartbeat(trial):
                candidate = Candidate() if baseline else self.space.suggest(trial)
                why = self.coordinator.step_back(trial)
                if why is not None:
                    self._fail(trial, why)
                    return None
                outcome = self._evaluate(trial, candidate, baseline)
        except KeyboardInterrupt:
            if self._fail(trial, "interrupted"):  # (one taken over was re-queued by its taker)
                requeue(self.ctx.study, storage.frozen(self.ctx.study, trial))
            raise
        if not self._tell(trial, outcome):
            return None
        accounting.tick_clock(self.ctx.study)
        self.cb.trial_finished(outcome)
        return outcome

    def _evaluate(self, trial: optuna.trial.Trial, candidate: Candidate, baseline: bool) -> TrialOutcome:
        """A copy of an earlier measurement of the same config, a pre-screen rejection, or a
        launch and measurement by the trial runner."""
        n = trial.number
        outcome, port = self.runner.new_outcome(n, candidate, baseline, trial.user_attrs.get("warm_start"))
        self.cb.trial_started(n, candidate, baseline)
        # read what other workers told since run_one's refresh, right before the lookup (as the
        # loop did before the record store): a config they measured meanwhile is a duplicate here
        self.records.refresh()
        same = self.records.find_measured(candidate)
        if same is not None:
            return _copy_of(outcome, same)
        reason = self.ctx.what.launcher.precheck(candidate, self.ctx.what.spec.workload)
        if reason:
            return self.runner.infeasible(outcome, FailureKind.PRE_SCREEN, f"pre-screen: {reason}")
        self.runner.screen_against = None if baseline else self._leader()
        try:
            return self.runner.run(outcome, port, self.ctx.run_dir / "trials" / f"{n:04d}", self.records.anchor())
        finally:
            self.runner.screen_against = None

    def _leader(self) -> Leader | None:
        """What a new search trial is screened against (tuner/trial/screening.py): the best
        feasible config measured in full, with the study's measured noise of the objective;
        None when screening is off or cannot apply (several objectives, the capacity search)."""
        spec = self.ctx.what.spec
        if spec.screen_fraction <= 0 or len(spec.objective_specs) != 1 or spec.primary.name == "capacity":
            return None
        outcomes = self.records.outcomes()
        noise = noise_of(outcomes, objective_key=spec.primary.key)
        return leader_of(outcomes, spec.primary.key, spec.primary.direction, noise.rel_sd)

    def _tell(self, trial: optuna.trial.Trial, outcome: TrialOutcome) -> bool:
        """Store `outcome` as the trial's result; False when the trial was taken over meanwhile
        (then nothing of it is stored: its config is re-run as the trial re-queued)."""
        stored = to_jsonable(outcome)
        # Infeasible trials still need a value; the worst possible one, so no sampler (or
        # reader of the raw study) mistakes a crash for a good result.
        measured = outcome.objectives if outcome.metrics is not None else None
        values = []
        for i, o in enumerate(self.ctx.what.spec.objective_specs):
            v = measured[i] if measured and i < len(measured) else None
            values.append((0.0 if o.direction is Direction.MAXIMIZE else 1e12) if v is None else v)
        try:
            for key, value in outcome.constraints.items():
                trial.set_constraint(key, value)
            trial.set_user_attr("outcome", stored)
            self.ctx.study.tell(trial, values if len(values) > 1 else values[0])
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not self._taken_over(trial):
                raise
            return False
        self.records.add(stored)
        return True

    def _fail(self, trial: optuna.trial.Trial, why: str) -> bool:
        """Fail `trial`, marked with the user attr `why` (surplus, in_flight_elsewhere,
        interrupted); False when it was taken over meanwhile (it is FAIL already)."""
        try:
            trial.set_user_attr(why, True)
            self.ctx.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not self._taken_over(trial):
                raise
            return False
        return True

    def _taken_over(self, trial: optuna.trial.Trial) -> bool:
        """Whether `trial` is no longer this worker's: finished by another (whose recovery found
        its heartbeat silent for a grace period and re-queued it). Says so in one line."""
        state = storage.frozen(self.ctx.study, trial).state
        if state == optuna.trial.TrialState.RUNNING:
            return False
        self.cb.phase(
            trial.number,
            f"trial {trial.number} was taken over ({state.name} in the study: its heartbeat was silent "
            f"for {storage.GRACE_S} s and it was re-queued); leaving it",
        )
        return True


def _copy_of(outcome: TrialOutcome, same: TrialOutcome) -> TrialOutcome:
    """`outcome` as a duplicate of the earlier trial `same`: its verdict and what ran, copied."""
    outcome.duplicate_of = same.number
    outcome.metrics = dict(same.metrics) if same.metrics is not None else None
    outcome.reason, outcome.failure = same.reason, same.failure
    outcome.constraints, outcome.objective = dict(same.constraints), same.objective
    outcome.objectives = list(same.objectives)
    outcome.argv, outcome.env, outcome.device_env = list(same.argv), dict(same.env), dict(same.device_env)
    outcome.cpus = list(same.cpus) if same.cpus is not None else None
    return outcome
