"""The per-trial results file and the best-versus-baseline comparison.

results.json is standard JSON (non-finite numbers become null: a p99 of +inf means requests
failed, which the error rate already says), so any tool can read it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kvtune.tuner.ranking import rank

# (metrics key, label, higher is better)
COMPARED = (
    ("output_throughput", "output tok/s", True),
    ("request_throughput", "requests/s", True),
    ("p95_ttft_ms", "TTFT p95 ms", False),
    ("p95_tpot_ms", "TPOT p95 ms", False),
    ("p95_itl_ms", "ITL p95 ms", False),
    ("p95_e2el_ms", "E2EL p95 ms", False),
)


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    return obj


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


def best_outcome(outcomes: list, direction: str):
    """The best feasible, actually measured trial whose re-measurement (if any) held, ranked by
    its objective averaged with the re-measurement (duplicates point at their original)."""
    ranked = rank(outcomes, direction)
    return ranked[0] if ranked else None


def confirmation_summary(outcomes: list, direction: str) -> dict | None:
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
                  direction: str, outcomes: list, directions: list[str] | None = None) -> dict:
    """results.json's content; written after every trial, so it is current while a study runs."""
    baseline = next((o for o in outcomes if o.baseline), None)
    best = best_outcome(outcomes, direction)
    payload = {
        "study": study, "spec": spec, "hardware": hardware, "backend_version": backend_version,
        "targets": targets, "direction": direction,
        "baseline_trial": baseline.number if baseline else None,
        "best_trial": best.number if best else None,
        "launches_saved_by_prescreen": sum(1 for o in outcomes if o.reason.startswith("pre-screen")),
        "trials": [o.to_dict() for o in outcomes],
        "confirmation": confirmation_summary(outcomes, direction),
    }
    if directions and len(directions) > 1:
        from kvtune.tuner.ranking import pareto
        payload["directions"] = directions
        payload["pareto_trials"] = [o.number for o in pareto(outcomes, directions)]
    if best is not None and baseline is not None and baseline.metrics:
        payload["best_vs_baseline"] = compare(best.metrics or {}, baseline.metrics)
    return payload


def write_results(path: Path, payload: dict) -> Path:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(to_jsonable(payload), indent=2))
    tmp.replace(path)
    return path
