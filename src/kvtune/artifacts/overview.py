"""The study so far, read from results.json alone: best, baseline, Pareto set, failures by reason.

`kvtune show`, the HTML report and `kvtune export` all need the same few facts about a study and
must agree on them, so they are computed once here, from the plain results dict (no Optuna, no
files, no console): which trial is best and which is the baseline, which measured configs are
Pareto-optimal for throughput against TTFT p95, and why the others failed, with free-text
reasons folded into a handful of categories a user can act on. `pick_trial` is the one place
that turns a user's ``--trial N`` into a trial that is safe to deploy.
"""

from __future__ import annotations

import math
from typing import Any

from kvtune.artifacts.results import compare
from kvtune.errors import SpecError

THROUGHPUT = "output_throughput"
TTFT = "p95_ttft_ms"
RAN_KEY = "server_ran"
# Reason prefixes the tuner writes for failures that are not target misses, in display order.
LAUNCH_CATEGORIES = ("pre-screen", "server failed to start", "server start timed out", "port busy",
                     "server crashed during the benchmark")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def trials(results: dict) -> list[dict]:
    return sorted(results.get("trials") or [], key=lambda t: t.get("number", 0))


def find(results: dict, number: int | None) -> dict | None:
    if number is None:
        return None
    return next((t for t in trials(results) if t.get("number") == number), None)


def is_measured(t: dict) -> bool:
    """Benchmarked in its own right: has metrics and is not a replay of an earlier trial."""
    return t.get("duplicate_of") is None and bool(t.get("metrics"))


def is_deployable(t: dict) -> bool:
    return bool(t.get("feasible")) and is_measured(t) and bool(t.get("argv"))


def best_trial(results: dict) -> dict | None:
    """The trial results.json names best; computed from the trials if the field is missing."""
    if "best_trial" in results:
        return find(results, results["best_trial"])
    cands = [t for t in trials(results) if is_deployable(t) and _finite(t.get("objective"))]
    if not cands:
        return None
    pick = min if results.get("direction") == "minimize" else max
    return pick(cands, key=lambda t: t["objective"])


def baseline_trial(results: dict) -> dict | None:
    if results.get("baseline_trial") is not None:
        return find(results, results["baseline_trial"])
    return next((t for t in trials(results) if t.get("baseline")), None)


def pareto(results: dict, x: str = TTFT, y: str = THROUGHPUT) -> list[dict]:
    """Feasible measured trials not dominated on (y max, x min), sorted by x ascending."""
    pts = [t for t in trials(results) if t.get("feasible") and is_measured(t)
           and _finite(t["metrics"].get(x)) and _finite(t["metrics"].get(y))]
    front = []
    for t in pts:
        tx, ty = t["metrics"][x], t["metrics"][y]
        dominated = any(o["metrics"][x] <= tx and o["metrics"][y] >= ty
                        and (o["metrics"][x] < tx or o["metrics"][y] > ty) for o in pts)
        if not dominated:
            front.append(t)
    return sorted(front, key=lambda t: (t["metrics"][x], -t["metrics"][y], t["number"]))


def failure_categories(t: dict) -> list[str]:
    """The categories one infeasible trial falls in (a trial missing two targets is in both)."""
    reason = (t.get("reason") or "").strip()
    for cat in LAUNCH_CATEGORIES:
        if reason.startswith(cat):
            return [cat]
    constraints = t.get("constraints") or {}
    ran = constraints.get(RAN_KEY)
    missed = [k for k, v in constraints.items() if k != RAN_KEY and _finite(v) and v > 0]
    if missed and not (_finite(ran) and ran > 0):
        return [f"missed target {k}" for k in missed]
    if reason:
        # An unrecognized reason: its text up to the first detail separator.
        return [reason.split(":", 1)[0].split(";", 1)[0].strip()[:80]]
    return ["infeasible (no reason recorded)"]


def failures(results: dict) -> list[dict]:
    """Infeasible trials grouped by category, largest group first. Duplicates are skipped: they
    replay an earlier trial's outcome and would count one failure twice."""
    groups: dict[str, dict] = {}
    for t in trials(results):
        if t.get("feasible") or t.get("duplicate_of") is not None:
            continue
        for cat in failure_categories(t):
            g = groups.setdefault(cat, {"category": cat, "count": 0, "trials": [], "example": ""})
            g["count"] += 1
            g["trials"].append(t["number"])
            g["example"] = g["example"] or (t.get("reason") or "")
    order = {c: i for i, c in enumerate(LAUNCH_CATEGORIES)}
    return sorted(groups.values(), key=lambda g: (-g["count"], order.get(g["category"], 99), g["category"]))


def overview(results: dict) -> dict:
    """Everything `kvtune show` prints, as plain data."""
    ts = trials(results)
    best, base = best_trial(results), baseline_trial(results)
    comparison = results.get("best_vs_baseline")
    if comparison is None and best and base and best.get("metrics") and base.get("metrics"):
        comparison = compare(best["metrics"], base["metrics"])
    return {
        "study": results.get("study"),
        "direction": results.get("direction", "maximize"),
        "objective": (results.get("spec") or {}).get("objective"),
        "targets": list(results.get("targets") or []),
        "hardware": results.get("hardware") or {},
        "backend_version": results.get("backend_version"),
        "counts": {
            "trials": len(ts),
            "measured": sum(1 for t in ts if is_measured(t)),
            "feasible": sum(1 for t in ts if t.get("feasible") and t.get("duplicate_of") is None),
            "duplicates": sum(1 for t in ts if t.get("duplicate_of") is not None),
            "infeasible": sum(1 for t in ts if not t.get("feasible") and t.get("duplicate_of") is None),
            "launches_saved_by_prescreen": results.get("launches_saved_by_prescreen", 0),
        },
        "best": best,
        "baseline": base,
        "best_vs_baseline": comparison or [],
        "pareto": pareto(results),
        "failures": failures(results),
    }


def pick_trial(results: dict, number: int | None = None) -> dict:
    """The trial to deploy: the best one, or trial `number` if it was feasible and measured.
    A duplicate resolves to the trial it replayed. Raises SpecError with a one-line message."""
    study = results.get("study", "?")
    ok = [t["number"] for t in trials(results) if is_deployable(t)]
    hint = f"feasible trials: {', '.join(map(str, ok))}" if ok else "no trial is feasible yet"
    if number is None:
        best = best_trial(results)
        if best is None:
            raise SpecError(f"study {study} has no feasible trial to export yet; "
                            f"run more trials or loosen the targets")
        return best
    t = find(results, number)
    if t is None:
        numbers = [x["number"] for x in trials(results)]
        span = f"trials {min(numbers)}-{max(numbers)}" if numbers else "no trials"
        raise SpecError(f"study {study} has no trial {number} ({span}); {hint}")
    if t.get("duplicate_of") is not None:
        t = find(results, t["duplicate_of"]) or t
    if not t.get("feasible"):
        why = t.get("reason") or "it missed a target"
        raise SpecError(f"trial {t['number']} of study {study} is not feasible ({why}); {hint}")
    if not is_deployable(t):
        raise SpecError(f"trial {t['number']} of study {study} was not measured; {hint}")
    return t
