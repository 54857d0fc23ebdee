"""The baseline as a sentinel: re-measured through the search and at its end, so drift shows.

A machine's state changes during a study (a build starts, a neighbour's job ends); a config
measured in a busy minute and one measured in a quiet minute are not comparable. The baseline,
re-measured every `SENTINEL_EVERY` measured trials and once at the end of the search, makes that
visible as a series: each point keeps the trial count at the time, the wall time, the objective
and the headline metrics, whether the measurement was disturbed, and the launch's
hardware-seconds by phase (the study's time lines count a mid-search point's as "sentinel",
study/time_spent.py; a launch moves the budget's clock, tuner/remeasure.py). The series lives
in the study's user attrs (`SENTINELS_ATTR`), so a resumed study neither loses nor repeats a point, and
only the process that summarizes (its coordinator's `summarizes`) measures it, so a multi-worker study
runs each point once. The end point is also the baseline's confirmation re-measurement (one
entry of its "runs"), so the confirmation does not measure the baseline twice in a row.

Every sentinel uses the confirmation's prompt seed, so the end point can be the first D of the
verdict's proof; the series' first point is the baseline's first measurement (the study's
own prompts), which the drift's first-vs-last comparison therefore spans.
"""

from __future__ import annotations

import math
from typing import Any

import optuna

from kvtune.study.measured_noise import Noise, inconsistent
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import SENTINEL
from kvtune.tuner.remeasure import Remeasurer, run_record

SENTINEL_EVERY = 10  # measured trials between two mid-search re-measurements of the baseline
SENTINELS_ATTR = "sentinels"
HEADLINE_METRICS = ("output_throughput", "request_throughput", "p95_ttft_ms", "p95_itl_ms", "error_rate")


def stored(study: optuna.Study) -> list[dict[str, Any]]:
    return list(study.user_attrs.get(SENTINELS_ATTR) or [])


def due(study: optuna.Study, measured: int, end: bool = False, every: int = SENTINEL_EVERY) -> bool:
    """Whether the sentinel is due at `measured` trials: every `SENTINEL_EVERY` in the search,
    once at the end; never twice at one count (a resume, or an end point right after a mid one)."""
    if measured < 1 or any(p["measured"] == measured for p in stored(study)):
        return False
    return end or measured % every == 0


def measure(
    remeasurer: Remeasurer, study: optuna.Study, baseline: TrialOutcome, measured: int, end: bool = False
) -> dict[str, Any] | None:
    """Re-measure the baseline now and store the point; the end point is also the baseline's
    confirmation run. Returns that run (None when the server never started)."""
    remeasurer.callbacks.phase(
        baseline.number, f"baseline sentinel after {measured} measured trials" + (" (end of the search)" if end else "")
    )
    again = remeasurer.launch(baseline, "baseline sentinel", SENTINEL)
    if again is None:
        return None
    run = run_record(again, remeasurer.seed(), "sentinel")
    metrics = again.metrics or {}
    point = {
        "measured": measured,
        "at": run["at"],
        "end": end,
        "objective": again.objective,
        "feasible": again.feasible,
        "disturbed": run["disturbed"],
        "metrics": {k: metrics[k] for k in HEADLINE_METRICS if k in metrics},
        "time_spent": run["time_spent"],  # by phase (study/time_spent.py); the end point's is its run's
    }
    study.set_user_attr(SENTINELS_ATTR, [*stored(study), point])
    if end:
        remeasurer.add(baseline, run, baseline)
    return run


def series(points: list[dict[str, Any]], baseline: TrialOutcome | None) -> list[dict[str, Any]]:
    """The sentinel series as shown: the baseline's first measurement (measured 0), then each point."""
    first = (
        []
        if baseline is None or baseline.objective is None
        else [
            {
                "measured": 0,
                "at": None,
                "end": False,
                "objective": baseline.objective,
                "feasible": baseline.feasible,
                "disturbed": bool(getattr(baseline, "disturbed", False)),
                "first": True,
            }
        ]
    )
    return first + sorted(points, key=lambda p: p["measured"])


def drift(points: list[dict[str, Any]], noise: Noise) -> dict[str, Any] | None:
    """First vs last undisturbed point of the series: their ratio and whether it exceeds what the
    pooled noise allows for two measurements of one config (`study.measured_noise.inconsistent`)."""
    usable = [
        p
        for p in points
        if not p.get("disturbed")
        and isinstance(p.get("objective"), (int, float))
        and math.isfinite(p["objective"])
        and p["objective"] > 0
    ]
    if len(usable) < 2:
        return None
    a, b = usable[0], usable[-1]
    return {
        "first": a["objective"],
        "last": b["objective"],
        "ratio": b["objective"] / a["objective"],
        "from_measured": a["measured"],
        "to_measured": b["measured"],
        "points": len(points),
        "beyond_noise": inconsistent(a["objective"], b["objective"], noise),
        "noise": noise.source(),
    }


def report(
    study: optuna.Study, baseline: TrialOutcome | None, noise: Noise, every: int = SENTINEL_EVERY
) -> dict[str, Any] | None:
    """results.json's "sentinel" block: the series and its drift (None when no point was measured)."""
    points = stored(study)
    if not points:
        return None
    shown = series(points, baseline)
    return {"every": every, "series": shown, "drift": drift(shown, noise)}
