"""The confirmation phase: no config is named best on one measurement.

After the search, the top `confirm_top` configs and the baseline are measured again, each on a
fresh server and with a different prompt seed (so a config must hold under two prompt sets and
arrival orders, not a replay of the first). If the re-measured leaders regress, the ranking now
puts a config that was measured only once on top; the phase then walks down the ranking and
re-measures that one too, up to `EXTRA_REMEASUREMENTS` more, so the named best is a config
that held on a fresh server whenever the bound allows. A multi-objective study re-measures its
Pareto set instead (bounded), and its final Pareto set is computed from the confirmed figures
(`TrialOutcome.scores`). Results live in the study's user attrs (tuner/fleet/records.py), so an
interrupted confirmation resumes where it stopped.

A re-measurement runs through the same trial runner as the search (tuner/trial/runner.py). A
launch that failed transiently (a port clash, a start-up timeout: `TrialOutcome.transient`, after
the runner's own retry) says nothing about the config, as in the search: it is launched again, up
to `TRANSIENT_ATTEMPTS` times in all; if it never starts, no verdict is recorded (the config stays
"measured once", and a resumed confirmation tries it again) and the walk passes it over.

`--time-budget` covers the confirmation too: a re-measurement is skipped (and the phase says so)
when what is left of the budget is shorter than the config's first launch and measurement took
(`expected_s`); a config with no measured wall time is re-measured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from kvtune.objectives.objective import Objective
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import pareto, rank
from kvtune.study.spec import StudySpec
from kvtune.tuner.events import Callbacks
from kvtune.tuner.fleet.records import TrialRecords
from kvtune.tuner.trial.runner import TrialRunner

EXTRA_REMEASUREMENTS = 3  # beyond confirm_top: how far down the ranking the walk may go
SEED_STEP = 7919  # the re-measurement's prompt seed = the study's + this (a different prompt set)
TRANSIENT_ATTEMPTS = 2  # launches of one re-measurement while they fail transiently


def first_choices(outcomes: list[TrialOutcome], spec: StudySpec) -> list[TrialOutcome]:
    """The top `confirm_top` by their first measurement (for several objectives: the Pareto set
    by first measurements, at most `confirm_top + EXTRA_REMEASUREMENTS` of it), and the
    baseline when it ran."""
    objectives: tuple[Objective, ...] = spec.objective_specs
    if len(objectives) > 1:
        front = pareto(outcomes, [o.direction for o in objectives], values=lambda o: o.objectives)
        chosen = front[: spec.confirm_top + EXTRA_REMEASUREMENTS]
    else:
        chosen = rank(outcomes, spec.primary.direction, confirmed=False)[: spec.confirm_top]
    baseline = next((o for o in outcomes if o.baseline), None)
    if chosen and baseline is not None and baseline not in chosen and baseline.metrics:
        chosen.append(baseline)
    return chosen


def unconfirmed_leader(outcomes: list[TrialOutcome], spec: StudySpec,
                       unsettled: frozenset[int] = frozenset()) -> TrialOutcome | None:
    """The config the ranking would name best now, when it was measured only once (configs in
    `unsettled`, whose re-measurement never started, are passed over)."""
    ranked = [o for o in rank(outcomes, spec.primary.direction) if o.number not in unsettled]
    return ranked[0] if ranked and ranked[0].confirmation is None else None


def expected_s(o: TrialOutcome) -> float | None:
    """The wall time a re-measurement of `o` should take: its first start-up and measurement
    (None when the measurement did not record its wall time, e.g. a capacity search)."""
    measure_s = (o.metrics or {}).get("measure_s")
    return None if measure_s is None else (o.startup_s or 0.0) + float(measure_s)


@dataclass
class Confirmation:
    """One confirmation phase: the runner re-measures, the records keep what it found.
    `time_left_s`: what is left of the time budget (None: no time budget)."""

    runner: TrialRunner
    records: TrialRecords
    callbacks: Callbacks
    run_dir: Path
    time_left_s: float | None = None
    clock: Callable[[], float] = time.monotonic
    unsettled: set[int] = field(default_factory=set)  # re-measurements that never started
    skipped: list[int] = field(default_factory=list)  # not re-measured: the time budget was spent

    def __post_init__(self) -> None:
        self._began = self.clock()

    @property
    def spec(self) -> StudySpec:
        return self.runner.what.spec

    def run(self) -> dict:
        """Re-measure until the named best held on a fresh server (bounded). Returns the record."""
        for o in first_choices(self.records.outcomes(), self.spec):
            if str(o.number) not in self.records.confirmations and self._fits(o):
                self._settle(o)
        extra = 0
        while extra < EXTRA_REMEASUREMENTS and len(self.spec.objective_specs) == 1:
            passed_over = frozenset(self.unsettled | set(self.skipped))
            leader = unconfirmed_leader(self.records.outcomes(), self.spec, passed_over)
            if leader is None:
                break
            if not self._fits(leader):
                continue  # passed over from now on; a shorter one further down may still fit
            self.callbacks.phase(leader.number, "the re-measured leaders regressed: confirming the next in line")
            self._settle(leader)
            extra += 1
        return dict(self.records.confirmations)

    def _fits(self, o: TrialOutcome) -> bool:
        """Whether re-measuring `o` fits in what is left of the time budget; says so when not."""
        need = expected_s(o)
        if self.time_left_s is None or need is None:
            return True
        left = self.time_left_s - (self.clock() - self._began)
        if need <= left:
            return True
        self.skipped.append(o.number)
        self.callbacks.phase(o.number, f"not re-measured: it took {need:.0f} s and {max(left, 0.0):.0f} s "
                                       f"of the time budget is left")
        return False

    def _settle(self, o: TrialOutcome) -> None:
        """Re-measure `o` until a launch says something about it; record the verdict."""
        for attempt in range(TRANSIENT_ATTEMPTS):
            record, again = self.remeasure(o)
            if not again.transient:
                self.records.confirm(o.number, record)
                return
            if attempt + 1 < TRANSIENT_ATTEMPTS:
                self.callbacks.phase(o.number, "the re-measurement did not start (transient): launching again")
        self.unsettled.add(o.number)
        self.callbacks.phase(o.number, "the re-measurement never started (transient failures): "
                                       "no verdict recorded, the config stays measured once")

    def remeasure(self, o: TrialOutcome) -> tuple[dict, TrialOutcome]:
        """One fresh launch of `o`'s config with another prompt seed; the record kept per trial
        and the re-measurement's outcome."""
        self.callbacks.trial_started(o.number, o.candidate, o.baseline)
        self.callbacks.phase(o.number, "confirming: re-measuring with a fresh server and other prompts")
        workload = replace(self.spec.workload, seed=(self.spec.workload.seed + SEED_STEP) % 2**32)
        again, port = self.runner.new_outcome(o.number, o.candidate, o.baseline)
        self.runner.run(again, port, self.run_dir / "trials" / f"{o.number:04d}-confirm",
                        self.records.measured_baseline(), workload)
        first = "-" if o.objective is None else f"{o.objective:.4g}"
        now = "-" if again.objective is None else f"{again.objective:.4g}"
        self.callbacks.phase(o.number, f"re-measured {self.spec.primary.name}: {now} (first {first})"
                             + ("" if again.feasible else f"; no longer feasible: {again.reason}"))
        record = {"metrics": again.metrics, "objective": again.objective, "objectives": again.objectives,
                  "feasible": again.feasible, "reason": again.reason, "seed": workload.seed}
        return record, again


def confirm(runner: TrialRunner, records: TrialRecords, callbacks: Callbacks, run_dir: Path,
            time_left_s: float | None = None) -> dict:
    """Run one confirmation phase (see `Confirmation`)."""
    return Confirmation(runner, records, callbacks, run_dir, time_left_s).run()
