"""One re-measurement of a measured config on a fresh server, and the per-trial record of them.

The confirmation's duel, its Pareto walk and the baseline sentinel all re-measure a config the
same way: a fresh launch through the trial runner (tuner/trial/runner.py) with the
confirmation's prompt seed, launched again while it fails transiently (a port clash says nothing
about a config). Each re-measurement is one entry of the trial's confirmation record ("runs");
the record's top-level keys (metrics, objective, objectives, feasible, reason) are the aggregate
of its *valid* runs (not disturbed, not inconsistent with the config's other runs), so
study/naming.py, `kvtune show` and the report read one figure per config as before.

Whether a re-measured config meets the targets is judged on that aggregate, not run by run: a
p95 of the demo's 16 requests is its second-slowest request, and one slow request in one run
made the defaults "break" their own `tpot_p95<2x` (64 ms first, 161 ms re-measured) and lose a
duel they were tying. A run that failed outright (a crash, failed requests, no figure) still
decides. Relative targets are set from the baseline's mean over all its valid measurements, the
best estimate of what they refer to. Re-measurements run without the early stop, so every run is
measured in full and means are of like with like.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from kvtune.clock import REAL_CLOCK
from kvtune.errors import TargetError
from kvtune.kinds import FailureKind
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.events import Callbacks
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.trial import scoring
from kvtune.tuner.trial.runner import TrialRunner

SEED_STEP = 7919  # the re-measurement's prompt seed = the study's + this (a different prompt set)
TRANSIENT_ATTEMPTS = 2  # launches of one re-measurement while they fail transiently


def disturbed(o: TrialOutcome) -> bool:
    """Whether the runner says `o` stayed disturbed after its own re-measurements (the
    interference monitor's verdict; False until that field exists)."""
    return bool(getattr(o, "disturbed", False))


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
        "disturbed": disturbed(again),
        "interference": getattr(again, "interference", None),
        # the fidelity probe's figures on this fresh server (the defaults': the A/A floor)
        "fidelity": {k: v for k, v in (again.fidelity or {}).items() if k != "reference"} or None,
        "at": REAL_CLOCK.wall(),
        "valid": not disturbed(again),
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def usable(value: Any) -> bool:
    """A figure that can be averaged: a finite number (not a bool, not None or a text)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def only_missed_targets(run: dict[str, Any]) -> bool:
    """`run` measured in full and only missed a target: its figures count, and whether the config
    meets the targets is judged on the mean of its runs (records without `failure` are older)."""
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


# Why mean metrics miss the targets ('' when they meet them all).
MissJudge = Callable[[dict[str, Any]], str]


def aggregate(runs: list[dict[str, Any]], miss: MissJudge | None = None) -> dict[str, Any]:
    """The confirmation record of a trial re-measured `runs` times: the runs, and the mean of the
    valid ones as its metrics/objective (every run's when none is valid, flagged `no_valid_run`).
    With `miss`, feasibility is the mean's against the targets unless a run failed outright."""
    valid = [r for r in runs if r.get("valid", True)] or list(runs)
    objectives = [float(r["objective"]) for r in valid if isinstance(r.get("objective"), (int, float))]
    metrics = mean_metrics([r.get("metrics") or {} for r in valid])
    width = min((len(r.get("objectives") or []) for r in valid), default=0)
    per_objective = [
        _mean([float(r["objectives"][i]) for r in valid if r["objectives"][i] is not None] or [math.nan])
        for i in range(width)
    ]
    outright = next((r for r in valid if not r.get("feasible") and not only_missed_targets(r)), None)
    if miss is not None and outright is None and metrics is not None:
        reason = miss(metrics)
    else:
        failed = outright or next((r for r in valid if not r.get("feasible")), None)
        reason = str((failed or {}).get("reason") or "no figure") if failed else ""
    return {
        "runs": list(runs),
        "metrics": metrics,
        "objective": _mean(objectives) if objectives else None,
        "objectives": per_objective,
        "feasible": not reason and bool(objectives),
        "reason": reason,
        "seed": runs[-1].get("seed"),
        "valid_runs": sum(1 for r in runs if r.get("valid", True)),
        # every run disturbed: the record is no evidence (study/naming.py, study/measured_noise.py skip it)
        **(
            {"no_valid_run": True, "disturbed": any(r.get("disturbed") for r in runs)}
            if not any(r.get("valid", True) for r in runs)
            else {}
        ),
    }


def runs_of(o: TrialOutcome) -> list[dict[str, Any]]:
    """`o`'s re-measurements so far (a record of an earlier version, without runs, is one run)."""
    c = o.confirmation
    if not c:
        return []
    return list(c.get("runs") or [{k: v for k, v in c.items() if k != "runs"}])


@dataclass
class Remeasurer:
    """Fresh launches of measured configs; each run is added to the trial's confirmation record."""

    runner: TrialRunner
    records: TrialRecords
    callbacks: Callbacks
    run_dir: Path

    def seed(self) -> int:
        return (self.runner.what.spec.workload.seed + SEED_STEP) % 2**32

    def launch(self, o: TrialOutcome, role: str) -> TrialOutcome | None:
        """Re-measure `o` until a launch says something about it; None when it never started."""
        for attempt in range(TRANSIENT_ATTEMPTS):
            again = self._once(o, role)
            if not again.transient:
                return again
            if attempt + 1 < TRANSIENT_ATTEMPTS:
                self.callbacks.phase(o.number, "the re-measurement did not start (transient): launching again")
        self.callbacks.phase(
            o.number,
            "the re-measurement never started (transient failures): "
            "no verdict recorded, the config stays measured once",
        )
        return None

    def _once(self, o: TrialOutcome, role: str) -> TrialOutcome:
        spec = self.runner.what.spec
        self.callbacks.trial_started(o.number, o.candidate, o.baseline)
        self.callbacks.phase(o.number, f"{role}: re-measuring with a fresh server and other prompts")
        workload = replace(spec.workload, seed=self.seed())
        again, port = self.runner.new_outcome(o.number, o.candidate, o.baseline)
        k = len(runs_of(o)) + 1
        folder = self.run_dir / "trials" / (f"{o.number:04d}-confirm" + ("" if k == 1 else f"-{k}"))
        self.runner.run(again, port, folder, self.records.measured_baseline(), workload, early_stop=False)
        first = "-" if o.objective is None else f"{o.objective:.4g}"
        now = "-" if again.objective is None else f"{again.objective:.4g}"
        self.callbacks.phase(
            o.number,
            f"re-measured {spec.primary.name}: {now} (first {first})"
            + ("" if again.feasible else f"; no longer feasible: {again.reason}")
            + ("; disturbed by other load" if disturbed(again) else ""),
        )
        return again

    # `baseline` below: the study's measured baseline (`records.measured_baseline()`, a pass over
    # every outcome), read once by the caller (a duel, a confirmation, a sentinel) and passed in.
    # The records keep that outcome's confirmation current, so its mean includes the runs added
    # since.
    def add(self, o: TrialOutcome, run: dict[str, Any], baseline: TrialOutcome | None) -> None:
        """Append `run` to `o`'s confirmation record (stored in the study: it survives a resume)."""
        self.records.confirm(o.number, aggregate([*runs_of(o), run], self._judge(baseline)))

    def invalidate(self, o: TrialOutcome, index: int, why: str, baseline: TrialOutcome | None) -> None:
        """Mark `o`'s run `index` as no evidence (`why`: disturbed, inconsistent) and re-aggregate."""
        runs = runs_of(o)
        runs[index] = {**runs[index], "valid": False, "invalid": why}
        self.records.confirm(o.number, aggregate(runs, self._judge(baseline)))

    def _judge(self, baseline: TrialOutcome | None) -> MissJudge:
        return lambda metrics: self.miss(metrics, baseline)

    def miss(self, metrics: dict[str, Any], baseline: TrialOutcome | None) -> str:
        """Why `metrics` (a config's mean over its re-measurements) miss the study's targets, ''
        when they meet them; relative targets set from `baseline_reference`."""
        try:
            resolved = [t.resolve(baseline_reference(baseline) or {}) for t in self.runner.targets]
        except TargetError:
            return scoring.NO_BASELINE
        return "; ".join(scoring.describe_miss(t, metrics) for t in resolved if not t.met(metrics))


def baseline_reference(base: TrialOutcome | None) -> dict[str, Any] | None:
    """The baseline's mean metrics over its first measurement and its valid re-measurements."""
    if base is None:
        return None
    again = [r.get("metrics") or {} for r in runs_of(base) if r.get("valid", True)]
    return mean_metrics([base.metrics or {}, *again])
