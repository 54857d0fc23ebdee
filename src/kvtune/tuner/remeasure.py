"""One re-measurement of a measured config on a fresh server, and the per-trial record of them.

The verdict's screening and proof runs, the Pareto set's re-measurements and the baseline
sentinel all re-measure a config the same way: a fresh launch through the trial runner
(tuner/trial/runner.py) with the confirmation's prompt seed, launched again while it fails
transiently (a port clash says nothing about a config; the failed launch's seconds count in the
start-up and waits of the one that ran, study/time_spent.py `with_failed_starts`). Every launch
moves the budget's clock as a finished trial does (tuner/accounting.py), so a study resumed
after its sentinels or its confirmation ran counts their time against `--time-budget` (within a
run it is already inside the run's wall time). Each re-measurement is one entry of the
trial's confirmation record ("runs"); the record's top-level keys are the mean of its *valid*
runs (not disturbed: metrics, objective, objectives), the first measurement left out (what the
search saw, biased up for a config it chose), and whether they held.

Whether a re-measured config still meets the targets is the verdict's judgement, not a second
rule: its target tests on the config's fresh runs (study/verdict_evidence.py `fresh_failure`,
relative targets against the defaults' fresh runs), so one slow request in one run is not a miss
(the demo's defaults measured p95 TPOT 64 ms, then 161 ms, against their own `tpot_p95<2x`) and
one run shows a latency target neither met nor missed. A run that failed outright (a crash,
failed requests, no figure) still decides. For the config the verdict tested, its own checks on
the proof runs decide (`TrialOutcome.held`). Re-measurements run without the early stop, so
every run is measured in full and means are of like with like.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from kvtune.clock import REAL_CLOCK
from kvtune.kinds import FailureKind
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import CONFIRMATION, with_failed_starts
from kvtune.study.verdict_evidence import fresh_failure, goal_of
from kvtune.tuner import accounting
from kvtune.tuner.events import Callbacks
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.trial.runner import TrialRunner

SEED_STEP = 7919  # the re-measurement's prompt seed = the study's + this (a different prompt set)
TRANSIENT_ATTEMPTS = 2  # launches of one re-measurement while they fail transiently


def run_record(again: TrialOutcome, seed: int, role: str) -> dict[str, Any]:
    """One re-measurement as the confirmation record keeps it; `valid` is decided by the caller."""
    return {
        "metrics": again.metrics,
        "objective": again.objective,
        "objectives": again.objectives,
        "feasible": again.feasible,
        "reason": again.reason,
        "failure": again.failure.value if again.failure else None,
        "seed": seed,
        "role": role,
        "disturbed": again.disturbed,
        "interference": again.interference,
        # the fidelity probe's figures on this fresh server (the defaults': the A/A floor)
        "fidelity": {k: v for k, v in (again.fidelity or {}).items() if k != "reference"} or None,
        "at": REAL_CLOCK.wall(),
        "time_spent": again.time_spent,  # hardware-seconds by phase (study/time_spent.py)
        "valid": not again.disturbed,
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def usable(value: Any) -> bool:
    """A figure that can be averaged: a finite number (not a bool, not None or a text)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def only_missed_targets(run: dict[str, Any]) -> bool:
    """`run` measured in full and only missed a target: its figures count, and whether the config
    meets the targets is the verdict's tests' to say (records without `failure` are older)."""
    return run.get("failure") == FailureKind.TARGET_MISSED.value and usable(run.get("objective"))


def mean_metrics(metric_sets: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last set, with every key that all sets give as a finite number replaced by the mean."""
    metric_sets = [m for m in metric_sets if m]
    if not metric_sets:
        return None
    shared = set.intersection(*(set(m) for m in metric_sets))
    metrics = dict(metric_sets[-1])
    for key in shared:
        values = [m[key] for m in metric_sets]
        if all(usable(v) for v in values):
            metrics[key] = _mean([float(v) for v in values])
    return metrics


# Why a config's valid fresh runs fail ('' when they hold), and the target checks said on them.
FreshJudge = Callable[[list[dict[str, Any]]], tuple[str, tuple[Any, ...]]]


def aggregate(runs: list[dict[str, Any]], judge: FreshJudge | None = None) -> dict[str, Any]:
    """The confirmation record of a trial re-measured `runs` times: the runs, and the mean of the
    valid ones as its metrics/objective (every run's when none is valid, flagged `no_valid_run`:
    no evidence, judged neither way). They fail when a run failed outright, or when `judge` (the
    verdict's target tests on them) says so; without a judge, only an outright failure fails them."""
    evidence = any(r.get("valid", True) for r in runs)
    valid = [r for r in runs if r.get("valid", True)] or list(runs)
    objectives = [float(r["objective"]) for r in valid if isinstance(r.get("objective"), (int, float))]
    width = min((len(r.get("objectives") or []) for r in valid), default=0)
    per_objective = [
        _mean([float(r["objectives"][i]) for r in valid if r["objectives"][i] is not None] or [math.nan])
        for i in range(width)
    ]
    outright = next((r for r in valid if not r.get("feasible") and not only_missed_targets(r)), None)
    checks: tuple[Any, ...] = ()
    if outright is not None:
        reason = str(outright.get("reason") or "no figure")
    elif judge is not None and evidence:  # every run disturbed: no evidence either way
        reason, checks = judge(valid)
    else:
        reason = ""
    return {
        "runs": list(runs),
        "metrics": mean_metrics([r.get("metrics") or {} for r in valid]),
        "objective": _mean(objectives) if objectives else None,
        "objectives": per_objective,
        "feasible": not reason and bool(objectives),
        "reason": reason,
        "targets": [asdict(c) for c in checks],
        "seed": runs[-1].get("seed"),
        "valid_runs": sum(1 for r in runs if r.get("valid", True)),
        # every run disturbed: the record is no evidence (study/naming.py, study/measured_noise.py skip it)
        **({} if evidence else {"no_valid_run": True, "disturbed": any(r.get("disturbed") for r in runs)}),
    }


def runs_of(o: TrialOutcome) -> list[dict[str, Any]]:
    """`o`'s re-measurements so far (a record of an earlier version, without runs, is one run)."""
    c = o.confirmation
    if not c:
        return []
    return list(c.get("runs") or [{k: v for k, v in c.items() if k != "runs"}])


@dataclass
class Remeasurer:
    """Fresh launches of measured configs; each run is added to the trial's confirmation record.
    `wall`: the time the budget's clock is moved to after each launch (a test injects it)."""

    runner: TrialRunner
    records: TrialRecords
    callbacks: Callbacks
    run_dir: Path
    wall: Callable[[], float] = REAL_CLOCK.wall

    def seed(self) -> int:
        return (self.runner.what.spec.workload.seed + SEED_STEP) % 2**32

    def launch(self, o: TrialOutcome, role: str, part: str = CONFIRMATION) -> TrialOutcome | None:
        """Re-measure `o` until a launch says something about it (with the seconds of the
        launches that failed before it); None when it never started, its launches' seconds then
        kept in the study as `part`'s (tuner/accounting.py `keep_never_started`). Each launch
        writes its own folder, so a retry keeps the failed launch's server log."""
        failed: list[dict[str, Any] | None] = []
        for attempt in range(TRANSIENT_ATTEMPTS):
            again = self._once(o, role, attempt)
            accounting.tick_clock(self.records.study, self.wall())  # it spent the time budget, as a trial does
            if not again.transient:
                again.time_spent = with_failed_starts(again.time_spent, failed)
                return again
            failed.append(again.time_spent)
            if attempt + 1 < TRANSIENT_ATTEMPTS:
                self.callbacks.phase(o.number, "the re-measurement did not start (transient): launching again")
        accounting.keep_never_started(self.records.study, part, o.number, failed)
        self.callbacks.phase(
            o.number,
            "the re-measurement never started (transient failures): "
            "no verdict recorded, the config stays measured once",
        )
        return None

    def _once(self, o: TrialOutcome, role: str, attempt: int = 0) -> TrialOutcome:
        spec = self.runner.what.spec
        self.callbacks.trial_started(o.number, o.candidate, o.baseline)
        self.callbacks.phase(o.number, f"{role}: re-measuring with a fresh server and other prompts")
        workload = replace(spec.workload, seed=self.seed())
        again, port = self.runner.new_outcome(o.number, o.candidate, o.baseline)
        k = len(runs_of(o)) + 1
        folder = (
            self.run_dir
            / "trials"
            / (f"{o.number:04d}-confirm" + ("" if k == 1 else f"-{k}") + (f"-retry{attempt}" if attempt else ""))
        )
        self.runner.run(again, port, folder, self.records.anchor(), workload, early_stop=False)
        first = "-" if o.objective is None else f"{o.objective:.4g}"
        now = "-" if again.objective is None else f"{again.objective:.4g}"
        self.callbacks.phase(
            o.number,
            f"re-measured {spec.primary.name}: {now} (first {first})"
            + ("" if again.feasible else f"; on this run: {again.reason}")
            + ("; disturbed by other load" if again.disturbed else ""),
        )
        return again

    # `baseline` below: the study's measured baseline (`records.measured_baseline()`, a pass over
    # every outcome), read once by the caller (the confirmation, a sentinel) and passed in. The
    # records keep that outcome's confirmation current: its fresh runs are the defaults' arm of
    # a relative target.
    def add(self, o: TrialOutcome, run: dict[str, Any], baseline: TrialOutcome | None) -> None:
        """Append `run` to `o`'s confirmation record (stored in the study: it survives a resume)."""
        self.records.confirm(o.number, aggregate([*runs_of(o), run], self._judge(o, baseline)))

    def _judge(self, o: TrialOutcome, baseline: TrialOutcome | None) -> FreshJudge:
        """The verdict's target tests on `o`'s valid fresh runs (tuner/remeasure.py's docstring)."""
        spec = self.runner.what.spec
        goal = goal_of(spec.primary.direction, self.runner.targets, spec.primary.name)
        base = [] if baseline is None else [r for r in runs_of(baseline) if r.get("valid", True)]
        return lambda valid: fresh_failure(valid, valid if o.baseline else base, goal, defaults=o.baseline)
