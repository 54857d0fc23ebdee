"""The study so far, read from results.json alone: best, baseline, Pareto set, failures by kind.

`kvtune show`, the HTML report and `kvtune export` all need the same few facts about a study and
must agree with the run that wrote it, so they read the trials back as `TrialOutcome`s and rank
them with `tuner.ranking`, the tuner's own functions (no Optuna, no files, no console). A
multi-objective study's Pareto set is over its own objectives, exactly the set `kvtune run`
printed; a single-objective study gets a throughput-against-TTFT-p95 trade-off view, labelled as
such. Failures are grouped by their `FailureKind` (target misses per target). `pick_trial` is the
one place that turns a user's ``--trial N`` into a trial that is safe to deploy. The figures
(best, baseline, best against baseline) are the run summary's own: the study's measured noise
(results.json's "noise", recomputed from the trials for files written before it), re-measured
figures where they exist, and every first measurement labelled as such (`study.naming.figure`).
"""

from __future__ import annotations

import math

from kvtune.errors import SpecError
from kvtune.kinds import Direction, FailureKind
from kvtune.objectives.objective import Objective, objective
from kvtune.study import measured_noise as noise_mod
from kvtune.study.best_figures import BestFigures, best_figures, recorded
from kvtune.study.fidelity_gate import gate_report
from kvtune.study.measured_noise import OBJECTIVE, Noise, noise_of
from kvtune.study.naming import Naming, comparison_basis, comparison_metrics, figure
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.study.ranking import pareto
from kvtune.study.results import COMPARED, BestChoice, study_naming, versus_rows
from kvtune.study.spec import parse_objectives
from kvtune.verdict import Verdict

# The view of a single-objective study's trade-off: x = TTFT p95 (lower is better), y = output
# throughput (higher is better). Not the study's objective: it is labelled as a trade-off.
TRADE_OFF = (objective("ttft_p95"), objective("output_throughput"))
NO_KIND = "infeasible (no kind recorded)"
NOT_HELD = "failed its re-measurement on a fresh server"


def outcomes(results: dict) -> list[TrialOutcome]:
    """The trials of results.json, as the tuner's own outcomes, by number."""
    return sorted((TrialOutcome.from_dict(t) for t in results.get("trials") or []), key=lambda o: o.number)


def study_objectives(results: dict) -> tuple[Objective, ...]:
    """What the study optimized (from its spec; output throughput when the file does not say)."""
    return parse_objectives((results.get("spec") or {}).get("objective") or "output_throughput")


def find(outs: list[TrialOutcome], number: int | None) -> TrialOutcome | None:
    return next((o for o in outs if o.number == number), None) if number is not None else None


def is_deployable(o: TrialOutcome) -> bool:
    return o.feasible and o.measured and bool(o.argv)


def best_trial(results: dict, outs: list[TrialOutcome] | None = None) -> TrialOutcome | None:
    """The trial results.json names best; ranked as the tuner ranks if the field is missing."""
    outs = outcomes(results) if outs is None else outs
    if "best_trial" in results:
        return find(outs, results["best_trial"])
    primary = study_objectives(results)[0]
    return study_naming(
        [o for o in outs if is_deployable(o)], primary.direction, results.get("server_defaults"), primary.key
    ).best


def baseline_trial(results: dict, outs: list[TrialOutcome] | None = None) -> TrialOutcome | None:
    outs = outcomes(results) if outs is None else outs
    if results.get("baseline_trial") is not None:
        return find(outs, results["baseline_trial"])
    return next((o for o in outs if o.baseline), None)


def pareto_axes(results: dict) -> tuple[tuple[Objective, ...], bool]:
    """(the objectives the Pareto set is over, whether it is the trade-off view)."""
    objs = study_objectives(results)
    return (objs, False) if len(objs) > 1 else (TRADE_OFF, True)


def metric_values(o: TrialOutcome, axes: tuple[Objective, ...]) -> list[float | None]:
    """The trial's measured value of each axis (None where it has no finite one)."""
    m = o.metrics or {}
    values = [m.get(a.key) for a in axes]
    return [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]


def study_front(results: dict, outs: list[TrialOutcome] | None = None) -> list[TrialOutcome]:
    """The Pareto set: over the study's objectives (the set `kvtune run` printed) when it has
    several, else the trade-off of throughput against TTFT p95; best first on the first axis."""
    outs = outcomes(results) if outs is None else outs
    axes, trade_off = pareto_axes(results)
    directions = [a.direction for a in axes]
    if not trade_off:
        return pareto(outs, directions)
    return pareto(outs, directions, values=lambda o: metric_values(o, axes))


def failure_categories(o: TrialOutcome) -> list[str]:
    """The categories one infeasible trial falls in (a trial missing two targets is in both;
    one that met every target once and then failed its re-measurement is `NOT_HELD`)."""
    if o.feasible and not o.held:
        return [NOT_HELD]
    if o.failure is FailureKind.TARGET_MISSED:
        missed = [k for k, v in o.constraints.items() if k != RUNS_KEY and v > 0]
        return [f"missed target {k}" for k in missed] or [o.failure.label]
    return [o.failure.label] if o.failure is not None else [NO_KIND]


def failures(results: dict, outs: list[TrialOutcome] | None = None) -> list[dict]:
    """Infeasible trials grouped by category, largest group first. Duplicates are skipped: they
    replay an earlier trial's outcome and would count one failure twice."""
    outs = outcomes(results) if outs is None else outs
    groups: dict[str, dict] = {}
    for o in outs:
        if (o.feasible and o.held) or o.duplicate_of is not None:
            continue
        for cat in failure_categories(o):
            g = groups.setdefault(cat, {"category": cat, "count": 0, "trials": [], "example": ""})
            g["count"] += 1
            g["trials"].append(o.number)
            g["example"] = g["example"] or (
                o.reason if not o.feasible else (o.confirmation or {}).get("reason") or NOT_HELD
            )
    order = {k.label: i for i, k in enumerate(FailureKind)}
    return sorted(groups.values(), key=lambda g: (-g["count"], order.get(g["category"], 99), g["category"]))


def recorded_noise(results: dict, outs: list[TrialOutcome], key: str = OBJECTIVE) -> Noise:
    """The study's noise on `key` as results.json recorded it (recomputed when it did not)."""
    recorded = (results.get("noise") or {}).get(key)
    if recorded is not None:
        return noise_mod.from_dict(recorded)
    return noise_of(outs, key, study_objectives(results)[0].key)


def versus_baseline(
    results: dict,
    outs: list[TrialOutcome],
    best: TrialOutcome | None,
    base: TrialOutcome | None,
    figures: BestFigures | None = None,
) -> tuple[list[dict], str]:
    """The best-against-baseline rows and which measurements they compare (the run's own; a
    file that records none gets them as the run makes them: `study.results.versus_rows`)."""
    if best is None or base is None or not best.metrics or not base.metrics:
        return [], ""
    if results.get("best_vs_baseline") is not None:
        basis = results.get("best_vs_baseline_evidence") or comparison_basis(best, base)
        return results["best_vs_baseline"], basis
    rows, _, basis = versus_rows(best, base, {k: recorded_noise(results, outs, k) for k, _, _ in COMPARED}, figures)
    return rows, basis


def objective_change(
    results: dict, outs: list[TrialOutcome], best: TrialOutcome | None, base: TrialOutcome | None
) -> dict | None:
    """The primary objective of the best against the baseline's, on the measurements the
    best-against-baseline table compares (both re-measured when both were), with its 95% +/-."""
    if best is None or base is None or best is base or not best.metrics or not base.metrics:
        return None
    key = study_objectives(results)[0].key
    best_m, base_m, _ = comparison_metrics(best, base)
    x, b = best_m.get(key), base_m.get(key)
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (x, b)) or not b:
        return None
    n = recorded_noise(results, outs)
    pm = n.t() * n.rel_sd * math.sqrt(2) * abs(x / b) * 100
    change = (x / b - 1) * 100
    return {
        "change_pct": change,
        "change_pm_pct": pm,
        "within_noise": abs(change) <= pm,
        "noise": n.source(),
        "basis": comparison_basis(best, base),
    }


def recorded_choice(results: dict, outs: list[TrialOutcome] | None = None) -> BestChoice:
    """The best results.json records, read back as the run's own `BestChoice` (the trial, why,
    the verdict, the noise per metric, the rows against the baseline), so `kvtune show` and the
    report print the decision the run made rather than making one; a file that records none is
    named now, as the tuner names it."""
    outs = outcomes(results) if outs is None else outs
    best, base = best_trial(results, outs), baseline_trial(results, outs)
    named = results.get("named_best") or {}
    stored = results.get("verdict")
    naming = Naming(
        best,
        str(named.get("why") or ""),
        list(named.get("tied_with") or []),
        bool(named.get("remeasured")),
        Verdict.from_dict(stored) if stored else None,
    )
    noise = {k: recorded_noise(results, outs, k) for k in (OBJECTIVE, *(m for m, _, _ in COMPARED))}
    objective = study_objectives(results)[0]
    figures = recorded_figures(results, outs, naming, base, objective)
    rows, basis = versus_baseline(results, outs, best, base, figures)
    measured = results.get("best_vs_baseline_measurements", 1) if rows else None
    return BestChoice(naming, base, objective.direction, noise, rows, measured, basis, figures)


def recorded_figures(
    results: dict, outs: list[TrialOutcome], naming: Naming, base: TrialOutcome | None, objective: Objective
) -> BestFigures | None:
    """The best's figures results.json records (study/best_figures.py), or, for a file older
    than them, made from its trials as the run makes them."""
    stored = recorded(results)
    if stored is not None:
        return stored
    maximize = objective.direction is Direction.MAXIMIZE
    return best_figures(outs, naming.best, base, naming.verdict, objective.key, maximize)


def overview(results: dict) -> dict:
    """Everything `kvtune show` prints, as data (trials as `TrialOutcome`s)."""
    outs = outcomes(results)
    choice = recorded_choice(results, outs)
    best, base, noise = choice.best, choice.baseline, choice.objective_noise
    objs = study_objectives(results)
    axes, trade_off = pareto_axes(results)
    return {
        "study": results.get("study"),
        "objectives": objs,
        "direction": objs[0].direction,
        "targets": list(results.get("targets") or []),
        "hardware": results.get("hardware") or {},
        "backend_version": results.get("backend_version"),
        "counts": {
            "trials": len(outs),
            "measured": sum(1 for o in outs if o.measured),
            # feasible = still feasible now: a config that failed its re-measurement is not
            "feasible": sum(1 for o in outs if o.feasible and o.held and o.duplicate_of is None),
            "not_held": sum(1 for o in outs if o.feasible and not o.held and o.duplicate_of is None),
            "duplicates": sum(1 for o in outs if o.duplicate_of is not None),
            "infeasible": sum(1 for o in outs if not (o.feasible and o.held) and o.duplicate_of is None),
            "launches_saved_by_prescreen": results.get("launches_saved_by_prescreen", 0),
        },
        "trials": outs,
        "best": best,
        "baseline": base,
        "choice": choice,
        "best_vs_baseline": choice.versus_baseline,
        "best_vs_baseline_evidence": choice.versus_basis,
        "noise": noise,
        "best_figure": figure(best, noise) if best else None,
        "baseline_figure": figure(base, noise) if base else None,
        "objective_change": objective_change(results, outs, best, base),
        "pareto": study_front(results, outs),
        "pareto_axes": axes,
        "pareto_is_trade_off": trade_off,
        "failures": failures(results, outs),
        "fidelity": gate_report(outs, None, results.get("spec") or {}, objs[0].key),
    }


def pick_trial(results: dict, number: int | None = None) -> TrialOutcome:
    """The trial to deploy: the best one, or trial `number` if it was feasible and measured.
    A duplicate resolves to the trial it replayed. Raises SpecError with a one-line message."""
    study = results.get("study", "?")
    outs = outcomes(results)
    ok = [o.number for o in outs if is_deployable(o)]
    hint = f"feasible trials: {', '.join(map(str, ok))}" if ok else "no trial is feasible yet"
    if number is None:
        best = best_trial(results, outs)
        if best is None:
            raise SpecError(f"study {study} has no feasible trial to export yet; run more trials or loosen the targets")
        return best
    o = find(outs, number)
    if o is None:
        numbers = [x.number for x in outs]
        span = f"trials {min(numbers)}-{max(numbers)}" if numbers else "no trials"
        raise SpecError(f"study {study} has no trial {number} ({span}); {hint}")
    if o.duplicate_of is not None:
        o = find(outs, o.duplicate_of) or o
    if not o.feasible:
        why = o.reason or "it missed a target"
        raise SpecError(f"trial {o.number} of study {study} is not feasible ({why}); {hint}")
    if not is_deployable(o):
        raise SpecError(f"trial {o.number} of study {study} was not measured; {hint}")
    return o
