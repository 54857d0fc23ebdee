"""Measuring one running server: repeated runs, pooled, with their spread.

Repeats pool their per-request samples (percentiles over all of them) and report the coefficient
of variation of the headline metrics across runs, so a user sees how much of a difference between
configs is noise. Repeats stop early, all of them at once, when a target can no longer hold
(tuner/trial/stopping.py). The capacity objective's searches over load levels, run on the same
`Bench`, are capacity.py; the windows the energy meter and the interference watch open around
each run's measured phase are phase_window.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.bench.multiturn import turn_metrics
from kvtune.bench.prefix_reuse import prefix_cache_hit_rate
from kvtune.bench.server_timing import server_timing_summary
from kvtune.bench.vllm_counters import pooled_acceptance
from kvtune.clock import REAL_CLOCK
from kvtune.objectives.metrics import summarize_requests
from kvtune.objectives.repeat_convergence import converged, convergence_key
from kvtune.objectives.targets import Target
from kvtune.study.spec import AUTO_REL_HALF_WIDTH
from kvtune.tuner.trial.screening import SCREENED, Leader, ScreenWatch
from kvtune.tuner.trial.stopping import RunWatch, planned_requests, saved_seconds
from kvtune.workload import Workload

# What the tuner measures with: `kvtune.bench.client.run` or a test's stand-in.
Bench = Callable[[str, Workload, BenchOptions], BenchRun]

SPREAD_KEYS = ("output_throughput", "request_throughput", "p95_ttft_ms", "p95_tpot_ms", "mean_ttft_ms")


@dataclass
class Measurement:
    metrics: dict[str, float]
    runs: list[dict[str, Any]] = field(default_factory=list)  # per repeat / per load level
    spread: dict[str, float] = field(default_factory=dict)  # CV (stdev / mean) per metric
    capacity: float | None = None
    bench_runs: list[BenchRun] = field(default_factory=list)
    stopped: str | None = None  # why the run was cut: a target could no longer hold, or screened out
    screened: bool = False  # cut by the screen (screening.py), not by the early stop
    chosen: list[BenchRun] | None = None  # the runs `metrics` are from (None: all bench_runs)
    windows: list[dict | None] | None = None  # per bench run: its interference window (to_dict), if watched


def coefficient_of_variation(values: list[float | None]) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if len(vals) < 2 or statistics.fmean(vals) == 0:
        return 0.0
    return statistics.stdev(vals) / abs(statistics.fmean(vals))


def _converged(runs: list[BenchRun], converge_on: str | None, repeats: int) -> bool:
    """`--repeats auto`: the runs so far pin `converge_on` down (objectives/repeat_convergence.py)."""
    if converge_on is None or len(runs) < 2:
        return False
    return converged(
        [r.metrics.get(convergence_key(converge_on), math.nan) for r in runs], AUTO_REL_HALF_WIDTH, repeats
    )


def _stop_record(
    watch: RunWatch | None, screen: ScreenWatch | None, screened: bool, runs: list[BenchRun]
) -> dict[str, float]:
    """The early stop's figures (planned requests, whether it stopped, the time it saved) and
    the screen's (``screened`` 1.0 and ``screen_saved_s`` when it cut the run)."""
    sent = sum(r.sent for r in runs)
    elapsed = sum(r.duration_s for r in runs)
    out: dict[str, float] = {}
    if screen is not None and screened:
        out = {SCREENED: 1.0, "screen_saved_s": saved_seconds(screen.planned, sent, elapsed)}
    if watch is None:
        return out
    stopped = runs[-1].stopped and not out
    return {
        **out,
        "planned_requests": float(watch.planned),
        "early_stopped": 1.0 if stopped else 0.0,
        "early_stop_saved_s": saved_seconds(watch.planned, sent, elapsed) if stopped else 0.0,
    }


def _planned(workload: Workload, repeats: int) -> int | None:
    per_run = planned_requests(workload)
    return per_run * repeats if per_run else None


def _stopping(options: BenchOptions, *watches: Callable[[Any], str | None] | None) -> BenchOptions:
    """`options` with one `stop_when` that feeds every request to each watch (the early stop,
    then the screen) and stops at the first reason."""
    ws = [w for w in watches if w is not None]
    if len(ws) < 2:
        return replace(options, stop_when=ws[0]) if ws else options

    def both(sample: Any) -> str | None:
        reasons = [w(sample) for w in ws]
        return next((r for r in reasons if r), None)

    return replace(options, stop_when=both)


def measure_repeats(
    bench: Bench,
    base_url: str,
    workload: Workload,
    repeats: int,
    options: BenchOptions,
    targets: Sequence[Target] = (),
    converge_on: str | None = None,
    leader: Leader | None = None,
    screen_fraction: float = 0.0,
) -> Measurement:
    """`repeats` runs on one server, their requests pooled. With `targets`, the exact early stop
    watches the pooled requests as they finish (one watch over every repeat, as the verdict pools
    them, see tuner/trial/stopping.py): once a target can no longer hold, the run in progress is cut
    and the repeats left are skipped; `Measurement.stopped` says why. The metrics also record
    ``measure_s`` (the wall time of the whole measurement, warm-up included), and with a watch
    ``planned_requests``, ``early_stopped`` (1 or 0) and ``early_stop_saved_s`` (the estimated
    time the stop saved). With `converge_on` (a metrics key), `repeats` is a cap: the runs stop
    once that figure's 95% confidence half-width is within 3% of its mean (`--repeats auto`),
    and ``repeats`` in the metrics says how many it took. A `leader` screens it (screening.py)."""
    watch = RunWatch.over(targets, workload, repeats)
    screen = ScreenWatch.over(leader, _planned(workload, repeats), screen_fraction)
    opts = _stopping(options, watch, screen)
    began = REAL_CLOCK.monotonic()
    runs: list[BenchRun] = []
    for i in range(repeats):
        w = workload if i == 0 else replace(workload, warmup_requests=0)
        runs.append(bench(base_url, w, opts))
        if runs[-1].stopped or _converged(runs, converge_on, repeats):
            break
    stopped = runs[-1].stopped
    screened = bool(screen is not None and screen.fired and stopped == screen.fired)
    record = {"measure_s": REAL_CLOCK.monotonic() - began, **_stop_record(watch, screen, screened, runs)}
    if converge_on is not None:
        record["repeats"] = float(len(runs))
    if len(runs) == 1:
        metrics = {**runs[0].metrics, **record}
        first = [{"repeat": 0, "metrics": runs[0].metrics}]
        return Measurement(metrics=metrics, runs=first, bench_runs=runs, stopped=stopped, screened=screened)
    samples = [s for r in runs for s in r.samples]
    # the same keys a single run has: goodput under the targets and llama-server's timing split
    pooled = summarize_requests(
        samples, sum(r.duration_s for r in runs), goodput_fn=options.goodput_fn, slo=options.slo
    )
    pooled.update(server_timing_summary(samples))
    if "spec_acceptance_rate" not in pooled:  # vLLM's counters: the runs' drafted-weighted mean
        pooled.update(pooled_acceptance(r.server_metrics for r in runs))
    pooled.update(turn_metrics(samples))
    pooled["prefix_cache_hit_rate"] = prefix_cache_hit_rate(samples, [r.server_metrics for r in runs])
    spread = {k: coefficient_of_variation([r.metrics.get(k) for r in runs]) for k in SPREAD_KEYS}
    pooled["repeats"] = float(len(runs))
    pooled.update(record)
    return Measurement(
        metrics=pooled,
        spread=spread,
        bench_runs=runs,
        stopped=stopped,
        screened=screened,
        runs=[{"repeat": i, "metrics": r.metrics} for i, r in enumerate(runs)],
    )
