"""The confirmation phase: no config is named best on one measurement.

The verdict decides (src/kvtune/verdict/, docs/verdicts.md): this module only schedules what
`verdict.next_step` asks for and stores what it decides. The search selects; the `confirm_top`
leaders are screened, one fresh run each per round for up to `confirm_rounds` rounds, those
clearly behind set aside after each (verdict/selection.py), and one of them is chosen; it and the
server's defaults are then re-measured D W W D on fresh servers with another prompt seed, and
judged every 3 pairs by a group-sequential test robust to one outlier (alpha spending keeps the
false-win rate at 4% however early it stops), up to `confirm_pairs` pairs. The baseline's
end-of-search sentinel (tuner/sentinel.py) is the first D, so the defaults are not measured twice
in a row. The verdict is stored in the study's user attrs (`VERDICT_ATTR`) and attached to the
trials it compared (tuner/records.py), which is what study/naming.py names. Because `next_step`
keeps no state, an interrupted confirmation resumes where it stopped: the runs so far are in the
records.

A study with several objectives first re-measures its Pareto set (the search's, at most
`confirm_top + EXTRA_REMEASUREMENTS` of it), one fresh run each, recorded as screening runs; the
Pareto set it reports is computed from fresh runs alone (study/ranking.py `pareto`). Then the
verdict tests one config on the primary objective under the targets, as above (a leader
re-measured for the Pareto set is not screened again): the single best is the verdict's.

A re-measurement runs through the same trial runner as the search (tuner/remeasure.py). A
launch that failed transiently (a port clash, a start-up timeout: `TrialOutcome.transient`, after
the runner's own retry) says nothing about the config, as in the search: it is launched again, up
to `TRANSIENT_ATTEMPTS` times in all; if it never starts, the verdict is decided on the runs
measured so far (usually "not enough evidence": the defaults stay).

`--time-budget` covers the confirmation too: a re-measurement is skipped (and the phase says so)
when what is left of the budget is shorter than the config's first launch and measurement took
(`expected_s`; a config with no measured wall time is re-measured), and the verdict is decided on
what was measured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kvtune.objectives.objective import Objective
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import pareto
from kvtune.study.spec import StudySpec
from kvtune.study.verdict_evidence import RUN_ROLE, evidence_of, goal_of, policy_of
from kvtune.tuner.events import Callbacks
from kvtune.tuner.records import VERDICT_ATTR, TrialRecords
from kvtune.tuner.remeasure import SEED_STEP, TRANSIENT_ATTEMPTS, Remeasurer, run_record
from kvtune.tuner.trial.runner import TrialRunner
from kvtune.verdict import Done, Policy, Role, Verdict, next_step

__all__ = [
    "Confirmation",
    "confirm",
    "expected_s",
    "first_choices",
    "SEED_STEP",
    "TRANSIENT_ATTEMPTS",
    "VERDICT_ATTR",
    "EXTRA_REMEASUREMENTS",
]

EXTRA_REMEASUREMENTS = 3  # Pareto members re-measured beyond `confirm_top` (several objectives)
MAX_STEPS = 200  # re-measurements one confirmation may ask for at most (a guard: the cap ends it far sooner)
ROLE_TEXT = {Role.SCREEN: "screening", Role.PROOF: "proving"}


def first_choices(outcomes: list[TrialOutcome], spec: StudySpec) -> list[TrialOutcome]:
    """What a study with several objectives re-measures for its Pareto set: the Pareto set by the
    search's measurements (it selects), at most `confirm_top + EXTRA_REMEASUREMENTS` of it, and
    the baseline when it ran."""
    objectives: tuple[Objective, ...] = spec.objective_specs
    front = pareto(outcomes, [o.direction for o in objectives], values=lambda o: o.objectives)
    chosen = front[: spec.confirm_top + EXTRA_REMEASUREMENTS]
    baseline = next((o for o in outcomes if o.baseline), None)
    if chosen and baseline is not None and baseline not in chosen and baseline.metrics:
        chosen.append(baseline)
    return chosen


def expected_s(o: TrialOutcome) -> float | None:
    """The wall time a re-measurement of `o` should take: its first start-up and measurement
    (None when the measurement did not record its wall time, e.g. a capacity search)."""
    measure_s = (o.metrics or {}).get("measure_s")
    return None if measure_s is None else (o.startup_s or 0.0) + float(measure_s)


@dataclass
class Confirmation:
    """One confirmation phase: the runner re-measures, the records keep what it found.
    `time_left_s`: what is left of the time budget (None: no time budget). `defaults`: the
    server's default flags (what "fewer flags changed" counts against). The baseline's
    end-of-search sentinel run is already in its confirmation record: the verdict reads it there
    as the first D."""

    runner: TrialRunner
    records: TrialRecords
    callbacks: Callbacks
    run_dir: Path
    time_left_s: float | None = None
    clock: Callable[[], float] = time.monotonic
    defaults: Mapping[str, Any] | None = None
    unsettled: set[int] = field(default_factory=set)  # re-measurements that never started
    skipped: list[int] = field(default_factory=list)  # not re-measured: the time budget was spent

    def __post_init__(self) -> None:
        self._began = self.clock()
        self.remeasurer = Remeasurer(self.runner, self.records, self.callbacks, self.run_dir)

    @property
    def spec(self) -> StudySpec:
        return self.runner.what.spec

    def run(self) -> dict:
        """Re-measure what the verdict (and a Pareto set) needs, then store the verdict. Returns
        the confirmation records."""
        if len(self.spec.objective_specs) > 1:
            baseline = self.records.measured_baseline()
            for o in first_choices(self.records.outcomes(), self.spec):
                if str(o.number) not in self.records.confirmations:
                    self._settle(o, baseline)
        if VERDICT_ATTR not in self.records.study.user_attrs:
            self._decide()
        return dict(self.records.confirmations)

    # ---- the verdict ------------------------------------------------------------------------------
    def _decide(self) -> None:
        """Measure what the verdict asks for until it is done; store it. A run that cannot be
        measured (the time budget is spent, the server never starts) ends the measuring: the
        verdict is decided on what there is."""
        goal = goal_of(self.spec.primary.direction, self.runner.targets, self.spec.primary.name)
        policy = policy_of(self.spec.confirm_top, self.spec.confirm_pairs, self.spec.confirm_rounds)
        stop_now, announced = False, False
        for _ in range(MAX_STEPS):
            self.records.refresh()
            outcomes = self.records.outcomes()
            step = next_step(evidence_of(outcomes, self.defaults), goal, policy, stop_now)
            if isinstance(step, Done):
                self._store(step.verdict)
                return
            o = next(x for x in outcomes if x.number == step.config)
            if not announced:
                self.callbacks.phase(o.number, _opening(policy))
                announced = True
            if not self._fits(o):
                stop_now = True
                continue
            again = self.remeasurer.launch(o, ROLE_TEXT[step.role])
            if again is None:
                self.unsettled.add(o.number)
                stop_now = True
                continue
            role = RUN_ROLE[step.role]
            self.remeasurer.add(o, run_record(again, self.remeasurer.seed(), role), self.records.measured_baseline())

    def _store(self, verdict: Verdict) -> None:
        """The verdict, in the study (attached to the trials it compared, tuner/records.py);
        the phase line says it."""
        self.records.decide(verdict.to_dict())
        self.callbacks.phase(verdict.named if verdict.named is not None else -1, verdict.reason)

    # ---- the time budget, and the Pareto set's re-measurements ------------------------------------
    def _fits(self, o: TrialOutcome) -> bool:
        """Whether re-measuring `o` fits in what is left of the time budget; says so when not."""
        need = expected_s(o)
        if self.time_left_s is None or need is None:
            return True
        left = self.time_left_s - (self.clock() - self._began)
        if need <= left:
            return True
        self.skipped.append(o.number)
        self.callbacks.phase(
            o.number, f"not re-measured: it took {need:.0f} s and {max(left, 0.0):.0f} s of the time budget is left"
        )
        return False

    def _settle(self, o: TrialOutcome, baseline: TrialOutcome | None) -> None:
        """Re-measure a Pareto member `o` once (launched again while it fails transiently); record
        the run as a screening run, which the verdict reads as one (`baseline`: the study's
        measured one, whose fresh runs relative targets are judged against)."""
        if not self._fits(o):
            return
        again = self.remeasurer.launch(o, ROLE_TEXT[Role.SCREEN])
        if again is None:
            self.unsettled.add(o.number)
            return
        self.remeasurer.add(o, run_record(again, self.remeasurer.seed(), RUN_ROLE[Role.SCREEN]), baseline)


def _opening(policy: Policy) -> str:
    screen = (
        f"{policy.screen} leaders are screened (one fresh run each per round, up to "
        f"{policy.screen_rounds} rounds, those clearly behind set aside), then "
        if policy.screen > 1
        else ""
    )
    return (
        f"confirming: {screen}the chosen one and the defaults alternate D W W D on fresh servers, "
        f"judged every {policy.every} pairs (at most {policy.cap})"
    )


def confirm(
    runner: TrialRunner,
    records: TrialRecords,
    callbacks: Callbacks,
    run_dir: Path,
    time_left_s: float | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> dict:
    """Run one confirmation phase (see `Confirmation`)."""
    return Confirmation(runner, records, callbacks, run_dir, time_left_s, defaults=defaults).run()
