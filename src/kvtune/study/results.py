"""The per-trial results file and the best-versus-baseline comparison.

results.json is standard JSON (non-finite numbers become null: a p99 of +inf means requests
failed, which the error rate already says), so any tool can read it. Its "trials" are
`TrialOutcome.to_dict()`s and read back with `TrialOutcome.from_dict`; best and Pareto come from
`tuner.ranking`, the same functions the run itself uses.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from kvtune.jsonsafe import dumps
from kvtune.kinds import Direction, FailureKind
from kvtune.objectives.objective import Objective
from kvtune.study.outcome import TrialOutcome
from kvtune.study.naming import comparison_metrics, name_best
from kvtune.study.ranking import pareto, rank

# (metrics key, label, higher is better)
COMPARED = (
    ("output_throughput", "output tok/s", True),
    ("request_throughput", "requests/s", True),
    ("p95_ttft_ms", "TTFT p95 ms", False),
    ("p95_tpot_ms", "TPOT p95 ms", False),
    ("p95_itl_ms", "ITL p95 ms", False),
    ("p95_e2el_ms", "E2EL p95 ms", False),
)


def compare(best: dict[str, float], baseline: dict[str, float]) -> list[dict]:
    """Rows of metric, baseline, best, change % and whether the change is an improvement."""
    rows = []
    for key, label, higher in COMPARED:
        b, x = baseline.get(key), best.get(key)
        if b is None or x is None or not (math.isfinite(b) and math.isfinite(x)):
            continue
        change = (x - b) / b * 100 if b else math.nan
        rows.append({"metric": key, "label": label, "baseline": b, "best": x,
                     "change_pct": change, "better": (x > b) if higher else (x < b)})
    return rows


def best_outcome(outcomes: Sequence[TrialOutcome], direction: Direction) -> TrialOutcome | None:
    """The named best (see `tuner.naming`): re-measured and held when a confirmation ran, ties
    within noise resolved toward the defaults and fewer flags."""
    return name_best(outcomes, direction).best


def confirmation_summary(outcomes: Sequence[TrialOutcome], direction: Direction) -> dict | None:
    """How the ranking held when the top configs were re-measured."""
    confirmed = [o for o in outcomes if o.confirmation is not None]
    if not confirmed:
        return None
    before = [o.number for o in rank(confirmed, direction, confirmed=False)]
    after = [o.number for o in rank(confirmed, direction)]
    dropped = [o.number for o in confirmed if not o.held]
    return {"remeasured": sorted(o.number for o in outcomes if o.confirmation is not None),
            "order_before": before, "order_after": after, "held": before == after and not dropped,
            "no_longer_feasible": dropped}


def build_payload(study: str, spec: dict, hardware: dict, backend_version: str, targets: list[str],
                  objectives: Sequence[Objective], outcomes: Sequence[TrialOutcome],
                  importance: dict | None = None) -> dict:
    """results.json's content; written after every trial, so it is current while a study runs.
    `importance` is `tuner.importance.param_importance(...).to_dict()` when it was computed."""
    direction = objectives[0].direction
    baseline = next((o for o in outcomes if o.baseline), None)
    naming = name_best(outcomes, direction)
    best = naming.best
    payload: dict[str, Any] = {
        "study": study, "spec": spec, "hardware": hardware, "backend_version": backend_version,
        "targets": targets, "direction": direction.value,
        "baseline_trial": baseline.number if baseline else None,
        "best_trial": best.number if best else None,
        "named_best": naming.to_dict(),
        "launches_saved_by_prescreen": sum(1 for o in outcomes if o.failure is FailureKind.PRE_SCREEN),
        "trials": [o.to_dict() for o in outcomes],
        "confirmation": confirmation_summary(outcomes, direction),
        "importance": importance if importance is not None else {"skipped": "not computed"},
    }
    if len(objectives) > 1:
        payload["directions"] = [o.direction.value for o in objectives]
        payload["pareto_trials"] = [o.number for o in pareto(outcomes, [o.direction for o in objectives])]
    if best is not None and baseline is not None and baseline.metrics:
        best_m, base_m, n = comparison_metrics(best, baseline)
        payload["best_vs_baseline"] = compare(best_m, base_m)
        payload["best_vs_baseline_measurements"] = n
    return payload


def write_results(path: Path, payload: dict) -> Path:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dumps(payload, indent=2))
    tmp.replace(path)
    return path
