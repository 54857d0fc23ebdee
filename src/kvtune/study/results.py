"""The per-trial results file and the best-versus-baseline comparison.

results.json is standard JSON (non-finite numbers become null: a p99 of +inf means requests
failed, which the error rate already says), so any tool can read it. Its "trials" are
`TrialOutcome.to_dict()`s and read back with `TrialOutcome.from_dict`; best and Pareto come from
`study.ranking`, the same functions the run itself uses. The "noise" block is the study's
measured noise per metric (`study.noise`), and "server_defaults" the server's own default flag
values the named best's flag count is taken against: readers without a launcher (`kvtune show`,
the report) name the same best from them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from kvtune.jsonsafe import dumps
from kvtune.kinds import Direction, FailureKind
from kvtune.objectives.noise import Noise
from kvtune.objectives.objective import Objective
from kvtune.study.measured_noise import OBJECTIVE, noise_of
from kvtune.study.naming import Naming, comparison_basis, comparison_metrics, name_best
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import pareto, rank

# (metrics key, label, higher is better)
COMPARED = (
    ("output_throughput", "output tok/s", True),
    ("request_throughput", "requests/s", True),
    ("p95_ttft_ms", "TTFT p95 ms", False),
    ("p95_tpot_ms", "TPOT p95 ms", False),
    ("p95_itl_ms", "ITL p95 ms", False),
    ("p95_e2el_ms", "E2EL p95 ms", False),
    # multi-turn workloads only (bench/multiturn.py): a prefix cache shows in later turns
    ("median_ttft_ms_turn1", "TTFT p50 turn 1 ms", False),
    ("median_ttft_ms_later", "TTFT p50 later turns ms", False),
)


def compare(best: dict[str, float], baseline: dict[str, float], noise: Mapping[str, Noise] | None = None) -> list[dict]:
    """Rows of metric, baseline, best, change % and whether the change is an improvement. With
    the study's `noise` per metric, each row also has ``change_pm_pct``, the 95% half-width of the
    change from one measurement per side (``t * s * sqrt(2)`` on the log-ratio, times the ratio:
    the delta method), ``within_noise`` and ``noise`` (where the +/- comes from)."""
    rows = []
    for key, label, higher in COMPARED:
        b, x = baseline.get(key), best.get(key)
        if b is None or x is None or not (math.isfinite(b) and math.isfinite(x)):
            continue
        change = (x - b) / b * 100 if b else math.nan
        row = {
            "metric": key,
            "label": label,
            "baseline": b,
            "best": x,
            "change_pct": change,
            "better": (x > b) if higher else (x < b),
        }
        if noise is not None and key in noise and b:
            n = noise[key]
            pm = n.t() * n.rel_sd * math.sqrt(2) * abs(x / b) * 100
            row.update(change_pm_pct=pm, within_noise=abs(change) <= pm, noise=n.source())
        rows.append(row)
    return rows


def best_outcome(
    outcomes: Sequence[TrialOutcome],
    direction: Direction,
    defaults: dict | None = None,
    objective_key: str | None = None,
) -> TrialOutcome | None:
    """The named best (see `study.naming`): re-measured and held when a confirmation ran, ties
    within the study's noise resolved toward the defaults and fewer flags changed."""
    return study_naming(outcomes, direction, defaults, objective_key).best


def study_naming(
    outcomes: Sequence[TrialOutcome],
    direction: Direction | str,
    defaults: dict | None = None,
    objective_key: str | None = None,
) -> Naming:
    """`name_best` with the study's own noise on its objective: the one call every writer and
    reader of a study makes, so they name the same best."""
    return name_best(outcomes, direction, defaults, noise_of(outcomes, OBJECTIVE, objective_key))


def confirmation_summary(outcomes: Sequence[TrialOutcome], direction: Direction) -> dict | None:
    """How the ranking held when the top configs were re-measured."""
    confirmed = [o for o in outcomes if o.confirmation is not None]
    if not confirmed:
        return None
    before = [o.number for o in rank(confirmed, direction, confirmed=False)]
    after = [o.number for o in rank(confirmed, direction)]
    # "no longer feasible": met the targets once, not on re-measurement (never the defaults
    # under a target they miss by construction, e.g. tpot<0.5x)
    dropped = [o.number for o in confirmed if o.feasible and not o.held]
    return {
        "remeasured": sorted(o.number for o in outcomes if o.confirmation is not None),
        "order_before": before,
        "order_after": after,
        "held": before == after and not dropped,
        "no_longer_feasible": dropped,
    }


def build_payload(
    study: str,
    spec: dict,
    hardware: dict,
    backend_version: str,
    targets: list[str],
    objectives: Sequence[Objective],
    outcomes: Sequence[TrialOutcome],
    importance: dict | None = None,
    server_defaults: dict | None = None,
) -> dict:
    """results.json's content; written after every trial, so it is current while a study runs.
    `importance` is `tuner.importance.param_importance(...).to_dict()` when it was computed;
    `server_defaults` the launcher's `server_defaults()` (None: not known)."""
    direction = objectives[0].direction
    baseline = next((o for o in outcomes if o.baseline), None)
    naming = study_naming(outcomes, direction, server_defaults, objectives[0].key)
    noises = {k: noise_of(outcomes, k, objectives[0].key) for k in (OBJECTIVE, *(m for m, _, _ in COMPARED))}
    best = naming.best
    payload: dict[str, Any] = {
        "study": study,
        "spec": spec,
        "hardware": hardware,
        "backend_version": backend_version,
        "targets": targets,
        "direction": direction.value,
        "baseline_trial": baseline.number if baseline else None,
        "best_trial": best.number if best else None,
        "named_best": naming.to_dict(),
        "verdict": naming.verdict.to_dict() if naming.verdict is not None else None,
        "launches_saved_by_prescreen": sum(1 for o in outcomes if o.failure is FailureKind.PRE_SCREEN),
        "trials": [o.to_dict() for o in outcomes],
        "confirmation": confirmation_summary(outcomes, direction),
        "importance": importance if importance is not None else {"skipped": "not computed"},
        "server_defaults": server_defaults,
        "noise": {k: n.to_dict() for k, n in noises.items()},
    }
    if len(objectives) > 1:
        payload["directions"] = [o.direction.value for o in objectives]
        payload["pareto_trials"] = [o.number for o in pareto(outcomes, [o.direction for o in objectives])]
    if best is not None and baseline is not None and baseline.metrics:
        best_m, base_m, n = comparison_metrics(best, baseline)
        payload["best_vs_baseline"] = compare(best_m, base_m, noises)
        payload["best_vs_baseline_measurements"] = n
        payload["best_vs_baseline_evidence"] = comparison_basis(best, baseline)
    return payload


def write_results(path: Path, payload: dict) -> Path:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dumps(payload, indent=2))
    tmp.replace(path)
    return path
