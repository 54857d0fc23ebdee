"""The end of a run: write results.json, launch-best.sh and verify-best.sh for the best the
results named, and collect what the summary shows (nearest misses, the Pareto set, the warm
start's fate).

The best is the one `study.results.choose_best` named for this write (`StudyResults.choice`),
never decided again here; the rest are pure decisions over the trial outcomes plus the file
writes; the CLI only renders the `StudySummary`. The launch script is `kvtune export --format
bash` of the best trial, written by the same renderer from the same `Deployable`, so the script
in the run directory and an export of it never differ.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kvtune.artifacts import cost_energy, export
from kvtune.artifacts.deployable import Deployable
from kvtune.durations import format_duration
from kvtune.errors import EXIT_DONE, EXIT_NOTHING_FEASIBLE
from kvtune.kinds import Direction
from kvtune.objectives.objective import Objective
from kvtune.objectives.targets import Target
from kvtune.study.disturbed import DisturbedMeasurement, disturbed_measurements
from kvtune.study.fidelity_gate import GateReport, gate_report
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import pareto, rank
from kvtune.study.results import BestChoice, StudyResults, write_results
from kvtune.study.spec import StudySpec
from kvtune.study.what_would_work import LoadFound, WhatWouldWork, what_would_work

LAUNCH_SCRIPT = "launch-best.sh"
VERIFY_SCRIPT = "verify-best.sh"  # `kvtune export --format bench` of the best trial


@dataclass
class WarmStartFate:
    outcome: TrialOutcome
    held: bool
    rank: int | None  # 1-based among feasible trials when it held
    of: int


@dataclass
class StudySummary:
    exit_code: int
    payload: dict
    results_path: Path
    choice: BestChoice  # the best and its figures, as results.json records them
    best_argv: list[str] = field(default_factory=list)
    best_command: str = ""  # `VAR=value ... argv`: launch-best.sh's environment and argv on one line
    launch_script: Path | None = None
    verify_script: Path | None = None
    nearest_misses: list[Miss] = field(default_factory=list)
    pareto: list[TrialOutcome] = field(default_factory=list)
    warm_start: list[WarmStartFate] = field(default_factory=list)
    early_stop: EarlyStops | None = None
    cost_energy: list[str] = field(default_factory=list)  # cost and energy of best and baseline
    disturbed: list[DisturbedMeasurement] = field(default_factory=list)  # measured on a busy machine
    fidelity: GateReport | None = None  # what the fidelity gate did (study/fidelity_gate.py)
    what_would_work: WhatWouldWork | None = None  # nothing met the targets: what would (results "what_would_work")

    @property
    def best(self) -> TrialOutcome | None:
        return self.choice.best

    @property
    def baseline(self) -> TrialOutcome | None:
        return self.choice.baseline

    @property
    def launches_saved(self) -> int:
        return int(self.payload.get("launches_saved_by_prescreen") or 0)

    @property
    def budget(self) -> dict:
        """What the search spent and why it stopped asking (tuner/accounting.py's report)."""
        return self.payload.get("budget") or {}


@dataclass
class EarlyStops:
    """The measurements cut short because a target could no longer hold."""

    trials: int  # trials stopped early
    saved_s: float  # estimated wall time saved (planned / heard x elapsed - elapsed, summed)
    spent_s: float  # what those measurements took

    def to_dict(self) -> dict:
        return {"trials": self.trials, "saved_s": round(self.saved_s, 1), "measure_s": round(self.spent_s, 1)}


def early_stops(outcomes: list[TrialOutcome]) -> EarlyStops | None:
    """The early stops among the trials measured in their own right, or None when none was."""
    stopped = [o.metrics or {} for o in outcomes if o.duplicate_of is None and o.stopped_early]
    if not stopped:
        return None
    return EarlyStops(
        len(stopped),
        sum(m.get("early_stop_saved_s") or 0.0 for m in stopped),
        sum(m.get("measure_s") or 0.0 for m in stopped),
    )


@dataclass
class Miss:
    """An infeasible trial that came close. What would work instead (best figures, the nearest
    config, the load that holds) is `WhatWouldWork`'s: a target loosened to the figure a miss
    measured would only restate the miss."""

    outcome: TrialOutcome

    @property
    def reason(self) -> str:
        """Why it missed: its own failure, or, for a config that met every target once and then
        failed its re-measurement on a fresh server, what the re-measurement said."""
        return miss_reason(self.outcome)


def miss_reason(o: TrialOutcome) -> str:
    """The reason a trial is not feasible now (a first measurement that held has no reason of
    its own: the re-measurement's is the one to show)."""
    if o.feasible and not o.held:
        again = (o.confirmation or {}).get("reason") or "it no longer met the targets"
        return f"met the targets once, then failed its re-measurement on a fresh server: {again}"
    if o.feasible and o.disturbed:  # its figures met the targets, but other load made them no evidence
        why = (o.interference or {}).get("reason") or "disturbed by the machine's other load"
        return f"met the targets, but every measurement of it was disturbed ({why}): no evidence; run again when the machine is quiet"
    if o.feasible and o.confirmation is None:  # the verdict tested another config, which did not hold
        return (
            "met the targets on its one search measurement, not tested on fresh servers "
            "(the verdict tests one config; run again with a higher confirm_top, e.g. --set confirm_top=5, to screen more)"
        )
    return o.reason


def nearest_misses(outcomes: list[TrialOutcome], targets: Sequence[Target], n: int = 3) -> list[Miss]:
    """The infeasible trials that came closest: smallest total constraint violation, the ones
    measured in full first (an early stop's figures rest on the few requests it heard)."""
    closest = sorted(
        (o for o in outcomes if o.duplicate_of is None),
        key=lambda o: (o.stopped_early, sum(max(0.0, v) for v in o.constraints.values())),
    )[:n]
    return [Miss(o) for o in closest]


def what_works(payload: dict, outcomes: list[TrialOutcome], targets: Sequence[Target], rerun: str) -> WhatWouldWork:
    """The "no" that says what would work (study/what_would_work.py), with the tuner's load
    search ("load_search", tuner/load_search.py) or, where it did not run, why, and the command
    that runs it when the time budget left no room (`rerun`: the command line of this run)."""
    spec = payload.get("spec") or {}
    record = payload.get("load_search") or {}
    load = LoadFound.from_dict(record["load"]) if record.get("load") else None
    command, why = "", ""
    if load is None and record.get("needs_s"):
        why = "the time budget was spent"
        command = rerun_command(rerun, float(record["needs_s"]))
    elif load is None and (spec.get("workload") or {}).get("trace"):
        why = "a trace's load is its replay speed: see the trace line"
    elif load is None and "capacity" in str(spec.get("objective")):
        why = "the capacity objective measured each config's load: see each trial's capacity"
    return what_would_work(outcomes, targets, load, command, why)


def rerun_command(rerun: str, needs_s: float) -> str:
    """This run's command with a time budget that leaves room for the load search: the finished
    study resumes, measures no new trial once its trials are spent, and runs only the search."""
    words = shlex.split(rerun) if rerun else ["kvtune", "run", "<the same flags>"]
    kept, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w == "--time-budget":
            skip = True
            continue
        if w.startswith("--time-budget="):
            continue
        kept.append(w)
    return shlex.join([*kept, "--time-budget", format_duration(needs_s)]).replace(
        "'<the same flags>'", "<the same flags>"
    )


def warm_start_fates(outcomes: list[TrialOutcome], direction: str) -> list[WarmStartFate]:
    ranked = [o.number for o in rank(outcomes, Direction(direction))]
    return [
        WarmStartFate(o, o.number in ranked, ranked.index(o.number) + 1 if o.number in ranked else None, len(ranked))
        for o in outcomes
        if o.warm_start and o.duplicate_of is None
    ]


def _list_disturbed(summary: StudySummary, outcomes: list[TrialOutcome]) -> None:
    """The measurements taken while the machine was busy (study/disturbed.py), into the summary
    and results.json's "disturbed" list."""
    summary.disturbed = disturbed_measurements(outcomes)
    summary.payload["disturbed"] = [d.to_dict() for d in summary.disturbed]


def summarize(
    run_dir: Path,
    results: StudyResults,
    outcomes: list[TrialOutcome],
    objectives: Sequence[Objective],
    targets: Sequence[Target],
    host: str,
    port: int,
    rerun: str = "",
) -> StudySummary:
    """Write `results` (results.json's content for these outcomes and the best it names) and,
    with a best, its scripts; without one, what would work (`rerun`: this run's command line,
    for the command that finds the load that holds when the time budget left no room)."""
    payload, best, baseline = results.payload, results.choice.best, results.choice.baseline
    direction = results.choice.direction
    results_path = run_dir / "results.json"
    summary = StudySummary(
        EXIT_DONE if best else EXIT_NOTHING_FEASIBLE,  # the README's exit statuses (kvtune.errors)
        payload,
        results_path,
        results.choice,
        warm_start=warm_start_fates(outcomes, direction),
        early_stop=early_stops(outcomes),
    )
    if summary.early_stop is not None:
        payload["early_stop"] = summary.early_stop.to_dict()
    _list_disturbed(summary, outcomes)
    summary.fidelity = gate_report(outcomes, targets, payload.get("spec") or {}, objectives[0].key)
    payload["fidelity"] = summary.fidelity.to_dict()
    payload["cost_energy"] = cost_energy.payload(best, baseline, payload.get("spec") or {})
    summary.cost_energy = payload["cost_energy"]["summary"]
    if best is None:
        summary.nearest_misses = nearest_misses(outcomes, targets)
        payload["nearest_misses"] = [{"trial": x.outcome.number, "reason": x.reason} for x in summary.nearest_misses]
        summary.what_would_work = what_works(payload, outcomes, targets, rerun)
        payload["what_would_work"] = summary.what_would_work.to_dict()
        write_results(results_path, payload)
        return summary
    deployed = Deployable(best, StudySpec.from_dict(payload.get("spec") or {}), payload, True, _metrics(baseline))
    summary.best_argv = export.deploy_argv(best.argv, host, port)
    summary.best_command = export.command_line(best, host, port)
    summary.launch_script = export.write_deployable(run_dir / LAUNCH_SCRIPT, "bash", deployed, host, port)
    payload["best_argv"] = summary.best_argv
    payload["best_command"] = summary.best_command
    payload["launch_script"] = str(summary.launch_script)
    summary.verify_script = export.write_deployable(run_dir / VERIFY_SCRIPT, "bench", deployed, host, port)
    payload["verify_script"] = str(summary.verify_script)
    if len(objectives) > 1:
        summary.pareto = pareto(outcomes, [o.direction for o in objectives])
    write_results(results_path, payload)
    return summary


def _metrics(o: TrialOutcome | None) -> dict:
    return dict(o.metrics or {}) if o is not None else {}
