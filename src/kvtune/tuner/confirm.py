"""The confirmation phase: no config is named best on one measurement.

A single-objective study ends in a duel (tuner/duel.py): the leader by first measurement against
its nearest rival (the next config by first measurement, the baseline when no other is
feasible), re-measured in A B A B order on fresh servers with another prompt seed, until the 95%
interval of their paired log-ratio excludes zero or `confirm_pairs` pairs were measured (then a
tie, and the config with fewer flags changed from the server's defaults wins). If the leader
loses, the winner faces the next config in line, up to `EXTRA_REMEASUREMENTS` more duels.

The defaults come first: when the baseline's first measurement is within the noise of the
leader's (`objectives.noise.within_noise`: the gap could be one config measured twice), the
leader faces the defaults before any other config. What a user must know is whether anything
beats the server's defaults; a duel between two near-equal tuned configs cannot tell, and a tie
there named a tuned config that ties with the defaults (issue 22: a CI run named the defaults
quiet and a tuned config busy, all three within 2% on first measurements). The defaults win a
tie (nothing is simpler), and a config that beat them then faces its nearest tuned rival. The
decision (each duel's leader, rival, pairs, interval, verdict, reason) is stored in the study's
user attrs (`DECISION_ATTR`) and copied into the winner's confirmation record, which is what
study/naming.py names. The baseline's end-of-search sentinel (tuner/sentinel.py) is its
re-measurement here: it serves as the first pair's B when the rival is the baseline, so the
baseline is not measured twice in a row.

A multi-objective study re-measures its Pareto set instead (bounded), and its final Pareto set
is computed from the confirmed figures (`TrialOutcome.scores`). Results live in the study's user
attrs (tuner/fleet/records.py), so an interrupted confirmation resumes where it stopped (a duel
cut short is run again; its runs so far stay in the records).

A re-measurement runs through the same trial runner as the search (tuner/remeasure.py). A
launch that failed transiently (a port clash, a start-up timeout: `TrialOutcome.transient`, after
the runner's own retry) says nothing about the config, as in the search: it is launched again, up
to `TRANSIENT_ATTEMPTS` times in all; if it never starts, no verdict is recorded.

`--time-budget` covers the confirmation too: a re-measurement is skipped (and the phase says so)
when what is left of the budget is shorter than the config's first launch and measurement took
(`expected_s`); a config with no measured wall time is re-measured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kvtune.objectives.noise import Noise, within_noise
from kvtune.objectives.objective import Objective
from kvtune.study.naming import flags_changed
from kvtune.study.noise import noise_of
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import pareto, rank
from kvtune.study.spec import StudySpec
from kvtune.tuner.duel import Duel
from kvtune.tuner.events import Callbacks
from kvtune.tuner.fleet.records import TrialRecords
from kvtune.tuner.remeasure import SEED_STEP, TRANSIENT_ATTEMPTS, Remeasurer, run_record
from kvtune.tuner.trial.runner import TrialRunner

__all__ = [
    "Confirmation",
    "confirm",
    "expected_s",
    "first_choices",
    "SEED_STEP",
    "TRANSIENT_ATTEMPTS",
    "DECISION_ATTR",
    "EXTRA_REMEASUREMENTS",
]

EXTRA_REMEASUREMENTS = 3  # how far down the ranking the walk (or the chain of duels) may go
DECISION_ATTR = "decision"  # the study's user attr holding the duels and the named winner


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


def expected_s(o: TrialOutcome) -> float | None:
    """The wall time a re-measurement of `o` should take: its first start-up and measurement
    (None when the measurement did not record its wall time, e.g. a capacity search)."""
    measure_s = (o.metrics or {}).get("measure_s")
    return None if measure_s is None else (o.startup_s or 0.0) + float(measure_s)


@dataclass
class Confirmation:
    """One confirmation phase: the runner re-measures, the records keep what it found.
    `time_left_s`: what is left of the time budget (None: no time budget). `defaults`: the
    server's default flags (what a tie's "fewer flags changed" counts against). `sentinel_run`:
    the baseline's end-of-search sentinel run, just measured (the first pair's B against it)."""

    runner: TrialRunner
    records: TrialRecords
    callbacks: Callbacks
    run_dir: Path
    time_left_s: float | None = None
    clock: Callable[[], float] = time.monotonic
    defaults: Mapping[str, Any] | None = None
    sentinel_run: dict | None = None
    unsettled: set[int] = field(default_factory=set)  # re-measurements that never started
    skipped: list[int] = field(default_factory=list)  # not re-measured: the time budget was spent

    def __post_init__(self) -> None:
        self._began = self.clock()
        self.remeasurer = Remeasurer(self.runner, self.records, self.callbacks, self.run_dir)

    @property
    def spec(self) -> StudySpec:
        return self.runner.what.spec

    def run(self) -> dict:
        """Re-measure until the named best held on a fresh server (bounded). Returns the record."""
        if len(self.spec.objective_specs) > 1:
            baseline = self.records.measured_baseline()
            for o in first_choices(self.records.outcomes(), self.spec):
                if str(o.number) not in self.records.confirmations:
                    self._settle(o, baseline)
        elif DECISION_ATTR not in self.records.study.user_attrs:
            self._duels()
        return dict(self.records.confirmations)

    # ---- a single objective: the duels ----------------------------------------------------------
    def noise(self) -> Noise:
        """The study's pooled noise on the objective, over every run measured so far."""
        self.records.refresh()
        return noise_of(self.records.outcomes(), objective_key=self.spec.primary.key)

    def _duels(self) -> None:
        """The leader against the next in line; a winning rival faces the one after (bounded)."""
        ranked = rank(self.records.outcomes(), self.spec.primary.direction, confirmed=False)
        if not ranked:
            return
        baseline = self.records.measured_baseline()  # read once: every duel's relative targets
        queue = ranked[1:] or ([baseline] if baseline is not None and baseline is not ranked[0] else [])
        if not queue:
            self._settle(ranked[0], baseline)  # nothing to duel: the only config still has to hold
            return
        leader, duels = ranked[0], list[dict]()
        queue = self._defaults_first(leader, queue)
        while queue and len(duels) <= EXTRA_REMEASUREMENTS:
            rival = queue.pop(0)
            self.callbacks.phase(
                leader.number,
                f"confirming: {_name(leader)} against {_name(rival)}, "
                f"A B A B on fresh servers (at most {self.spec.confirm_pairs} pairs)",
            )
            fresh = self.sentinel_run if not duels else None  # the baseline's end sentinel, just measured
            record = Duel(
                leader,
                rival,
                self.remeasurer,
                self.spec.primary.direction.value,
                self.spec.confirm_pairs,
                self.noise,
                lambda o: flags_changed(o, self.defaults),
                baseline,
                self._fits,
                rival_run=fresh if rival.baseline else None,
                leader_run=fresh if leader.baseline else None,
            ).run()
            if record is None:
                break
            duels.append(record)
            self.callbacks.phase(record["winner"], record["reason"])
            held = record["winner"] == leader.number
            if rival.baseline:
                if not held:
                    break  # nothing beat the defaults (a tie goes to them): no other duel can change that
                continue  # the leader beat the defaults: now its nearest tuned rival
            if held:
                break
            leader = rival
        if duels:
            self._store_decision(duels)

    def _defaults_first(self, leader: TrialOutcome, queue: list[TrialOutcome]) -> list[TrialOutcome]:
        """`queue` with the baseline moved to the front when its first measurement is within the
        noise of the leader's (see the module's docstring); unchanged otherwise."""
        base = next((o for o in queue if o.baseline), None)
        if base is None or leader.objective is None or base.objective is None:
            return queue
        if not within_noise(leader.objective, base.objective, self.noise()):
            return queue
        return [base, *(o for o in queue if o is not base)]

    def _store_decision(self, duels: list[dict]) -> None:
        last = duels[-1]
        decision = {
            "winner": last["winner"],
            "why": last["reason"],
            "tie": last["tie"],
            "tied_with": [n for n in (last["leader"], last["rival"]) if n != last["winner"]] if last["tie"] else [],
            "duels": duels,
        }
        self.records.study.set_user_attr(DECISION_ATTR, decision)
        winner = self.records.confirmations.get(str(last["winner"]))
        if winner is not None:
            self.records.confirm(last["winner"], {**winner, "decision": decision})

    # ---- several objectives, and a lone config ---------------------------------------------------
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
        """Re-measure `o` once (launched again while it fails transiently); record the run
        (`baseline`: the study's measured one, for relative targets)."""
        if not self._fits(o):
            return
        again = self.remeasurer.launch(o, "confirming")
        if again is None:
            self.unsettled.add(o.number)
            return
        self.remeasurer.add(o, run_record(again, self.remeasurer.seed(), "confirm"), baseline)


def _name(o: TrialOutcome) -> str:
    return "the defaults" if o.baseline else f"trial {o.number}"


def confirm(
    runner: TrialRunner,
    records: TrialRecords,
    callbacks: Callbacks,
    run_dir: Path,
    time_left_s: float | None = None,
    defaults: Mapping[str, Any] | None = None,
    sentinel_run: dict | None = None,
) -> dict:
    """Run one confirmation phase (see `Confirmation`)."""
    return Confirmation(
        runner, records, callbacks, run_dir, time_left_s, defaults=defaults, sentinel_run=sentinel_run
    ).run()
