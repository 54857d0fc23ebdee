"""The per-trial results file and the one decision of which trial is best.

results.json is standard JSON (non-finite numbers become null: a p99 of +inf means requests
failed, which the error rate already says), so any tool can read it. Its "trials" are
`TrialOutcome.to_dict()`s and read back with `TrialOutcome.from_dict`. `choose_best` names the
best once per write (`study.naming` over the study's own noise, `study.measured_noise`) with its
figures against the baseline, as a typed `BestChoice`: results.json records it, and the run's
summary, its launch and verify scripts take the same object, so no writer decides a second
time. "server_defaults" are the server's own default flag values the named best's flag count is
taken against: readers without a launcher (`kvtune show`, the report) name the same best from
them when a file does not record one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from kvtune.jsonsafe import dumps
from kvtune.kinds import Direction, FailureKind
from kvtune.objectives.objective import Objective
from kvtune.study.best_figures import BestFigures, best_figures
from kvtune.study.measured_noise import OBJECTIVE, Noise, noise_of
from kvtune.study.naming import Naming, comparison_basis, comparison_metrics, name_best
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import pareto, rank, rank_fresh
from kvtune.study.time_spent import StudyTime

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


def study_naming(
    outcomes: Sequence[TrialOutcome],
    direction: Direction | str,
    defaults: dict | None = None,
    objective_key: str | None = None,
) -> Naming:
    """`name_best` with the study's own noise on its objective (the decision inside
    `choose_best`, and the fallback of a reader whose results.json names no best)."""
    return name_best(outcomes, direction)


@dataclass(frozen=True)
class BestChoice:
    """Which trial the study names best, and the figures every writer and renderer shows for it
    (results.json, the run's summary, the launch and verify scripts, the report, `kvtune show`):
    decided once per results write by `choose_best`, then passed on typed, never re-decided."""

    naming: Naming
    baseline: TrialOutcome | None
    direction: Direction
    noise: Mapping[str, Noise]  # the study's noise per metric key, OBJECTIVE included
    versus_baseline: list[dict] = field(default_factory=list)  # `compare` rows, best against baseline
    versus_measurements: int | None = None  # measurements per side those rows rest on
    versus_basis: str = ""  # which measurements they compare (`comparison_basis`)
    figures: BestFigures | None = None  # the best's figures every surface shows (study/best_figures.py)

    @property
    def best(self) -> TrialOutcome | None:
        return self.naming.best

    @property
    def objective_noise(self) -> Noise:
        return self.noise[OBJECTIVE]

    def to_payload(self) -> dict[str, Any]:
        """The decision as results.json records it."""
        best = self.best
        out: dict[str, Any] = {
            "baseline_trial": self.baseline.number if self.baseline else None,
            "best_trial": best.number if best else None,
            "named_best": self.naming.to_dict(),
            "verdict": self.naming.verdict.to_dict() if self.naming.verdict is not None else None,
            "noise": {k: n.to_dict() for k, n in self.noise.items()},
            "best_figures": self.figures.to_dict() if self.figures is not None else None,
        }
        if self.versus_measurements is not None:
            out["best_vs_baseline"] = self.versus_baseline
            out["best_vs_baseline_measurements"] = self.versus_measurements
            out["best_vs_baseline_evidence"] = self.versus_basis
        return out


def choose_best(
    outcomes: Sequence[TrialOutcome], objectives: Sequence[Objective], server_defaults: dict | None = None
) -> BestChoice:
    """The one place a study's best is named (`study.naming`: re-measured and held when a
    confirmation ran, ties within the study's noise resolved toward the defaults and fewer flags
    changed from `server_defaults`), with its comparison against the baseline."""
    key = objectives[0].key
    direction = objectives[0].direction
    baseline = next((o for o in outcomes if o.baseline), None)
    naming = study_naming(outcomes, direction, server_defaults, key)
    noises = {k: noise_of(outcomes, k, key) for k in (OBJECTIVE, *(m for m, _, _ in COMPARED))}
    best = naming.best
    figures = best_figures(outcomes, best, baseline, naming.verdict, key, direction is Direction.MAXIMIZE)
    if best is None or baseline is None or not baseline.metrics:
        return BestChoice(naming, baseline, direction, noises, figures=figures)
    rows, n, basis = versus_rows(best, baseline, noises, figures)
    return BestChoice(naming, baseline, direction, noises, rows, n, basis, figures)


def versus_rows(
    best: TrialOutcome, baseline: TrialOutcome, noise: Mapping[str, Noise], figures: BestFigures | None
) -> tuple[list[dict], int, str]:
    """The best-against-defaults table: the verdict's fresh runs when `figures` are (each
    change with its 95% interval, `figures.runs` runs per side), else the search measurements
    with the study's noise; no rows when the best is the defaults (a table of the defaults
    against themselves says nothing)."""
    if best.number == baseline.number:
        return [], 0, figures.label() if figures is not None else ""
    if figures is not None and figures.fresh:
        return fresh_rows(figures), figures.runs, figures.label()
    best_m, base_m, n = comparison_metrics(best, baseline)
    return compare(best_m, base_m, noise), n, comparison_basis(best, baseline)


def fresh_rows(figures: BestFigures) -> list[dict]:
    """`compare`'s row shape from fresh figures: the change's 95% interval as
    ``change_low_pct``/``change_high_pct``; ``within_noise`` when it holds 0."""
    rows = []
    for r in figures.rows:
        if r.defaults is None or r.change is None:
            continue
        row: dict[str, Any] = {
            "metric": r.metric,
            "label": next((lab for k, lab, _ in COMPARED if k == r.metric), r.label),
            "baseline": r.defaults.value,
            "best": r.best.value,
            "change_pct": r.change.pct,
            "better": bool(r.better),
            "runs": figures.runs,
        }
        if r.change.low is not None and r.change.high is not None:
            row.update(
                change_low_pct=r.change.low, change_high_pct=r.change.high, within_noise=not r.change.excludes_zero()
            )
        rows.append(row)
    return rows


def confirmation_summary(outcomes: Sequence[TrialOutcome], direction: Direction) -> dict | None:
    """How the ranking held when the top configs were re-measured."""
    confirmed = [o for o in outcomes if o.confirmation is not None]
    if not confirmed:
        return None
    before = [o.number for o in rank(confirmed, direction, confirmed=False)]
    after = [o.number for o in rank_fresh(confirmed, direction)]
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


@dataclass
class StudyResults:
    """results.json's content and the best it records, typed: whatever writes or renders the
    study at the end (`artifacts.summary`) takes `choice` rather than deciding again."""

    choice: BestChoice
    payload: dict


def study_results(
    study: str,
    spec: dict,
    hardware: dict,
    backend_version: str,
    targets: list[str],
    objectives: Sequence[Objective],
    outcomes: Sequence[TrialOutcome],
    importance: dict | None = None,
    server_defaults: dict | None = None,
) -> StudyResults:
    """results.json's content; written after every trial, so it is current while a study runs.
    `importance` is `tuner.importance.param_importance(...).to_dict()` when it was computed;
    `server_defaults` the launcher's `server_defaults()` (None: not known)."""
    choice = choose_best(outcomes, objectives, server_defaults)
    direction = choice.direction
    payload: dict[str, Any] = {
        "study": study,
        "spec": spec,
        "hardware": hardware,
        "backend_version": backend_version,
        "targets": targets,
        "direction": direction.value,
        **choice.to_payload(),
        "launches_saved_by_prescreen": sum(1 for o in outcomes if o.failure is FailureKind.PRE_SCREEN),
        "trials": [o.to_dict() for o in outcomes],
        "confirmation": confirmation_summary(outcomes, direction),
        # where the hardware time went (study/time_spent.py): the trials' launches; `add_study_blocks`
        # adds those the study-level blocks record (the sentinels, the anchor, the load search)
        "time_spent": StudyTime.of(outcomes).to_dict(),
        "importance": importance if importance is not None else {"skipped": "not computed"},
        "server_defaults": server_defaults,
    }
    if len(objectives) > 1:
        payload["directions"] = [o.direction.value for o in objectives]
        payload["pareto_trials"] = [o.number for o in pareto(outcomes, [o.direction for o in objectives])]
    return StudyResults(choice, payload)


def add_study_blocks(payload: dict, blocks: Mapping[str, Any]) -> dict:
    """`payload` with the study-level blocks read from the study (tuner/ledger.py `report`: the
    sentinel series, the verdict, the anchor, the load search), its "time_spent" then counting
    every launch they record too. The session's results.json and a study read from its storage
    (`kvtune show --storage`, tuner/fleet/watch.py) both come through here, so both say the same."""
    payload.update(blocks)
    payload["time_spent"] = StudyTime.of_results(payload).to_dict()
    return payload


def build_payload(*args: Any, **kwargs: Any) -> dict:
    """`study_results`' file content alone, for a reader that only shows it (a running study
    read from its storage)."""
    return study_results(*args, **kwargs).payload


def write_results(path: Path, payload: dict) -> Path:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dumps(payload, indent=2))
    tmp.replace(path)
    return path
