"""Measuring one running server: repeated runs with their spread, or a capacity search.

Repeats pool their per-request samples (percentiles over all of them) and report the coefficient
of variation of the headline metrics across runs, so a user sees how much of a difference between
configs is noise. The capacity objective answers the operator's question "how many users can this
box serve under my targets?": on the one running server (no relaunch per level) it doubles the
load until a target breaks (measured twice before it counts), then bisects between the last level
that held and the first that broke. Load is concurrency in closed loop and request rate in open
loop; how each level is measured in steady state (warm-up, ramp, waves, duration) is capacity.py.
Repeats stop early, all of them at once, when a target can no longer hold (tuner/trial/stopping.py).
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
from kvtune.clock import REAL_CLOCK
from kvtune.energy import EnergyReading, Meter, combine, energy_metrics
from kvtune.interference.observed import Interference, Watch
from kvtune.objectives.cost import cost_metrics
from kvtune.objectives.metrics import summarize_requests
from kvtune.objectives.named_best import converged, convergence_key
from kvtune.objectives.targets import Target
from kvtune.study.spec import AUTO_REL_HALF_WIDTH
from kvtune.tuner.trial.capacity import (
    MAX_CONCURRENCY,
    MAX_RATE,
    CapacityPlan,
    LevelStatus,
    is_open,
    level_status,
    level_workload,
    ramp_for,
    typical_duration_s,
)
from kvtune.tuner.trial.stopping import RunWatch, saved_seconds
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
    stopped: str | None = None  # the early stop's reason, when a target could no longer hold
    chosen: list[BenchRun] | None = None  # the runs `metrics` are from (None: all bench_runs)
    windows: list[dict | None] | None = None  # per bench run: its interference window (to_dict), if watched


def coefficient_of_variation(values: list[float | None]) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if len(vals) < 2 or statistics.fmean(vals) == 0:
        return 0.0
    return statistics.stdev(vals) / abs(statistics.fmean(vals))


def _converged(runs: list[BenchRun], converge_on: str | None, repeats: int) -> bool:
    """`--repeats auto`: the runs so far pin `converge_on` down (see objectives.evidence.converged)."""
    if converge_on is None or len(runs) < 2:
        return False
    return converged(
        [r.metrics.get(convergence_key(converge_on), math.nan) for r in runs], AUTO_REL_HALF_WIDTH, repeats
    )


def _stop_record(watch: RunWatch | None, runs: list[BenchRun]) -> dict[str, float]:
    """The early stop's figures: planned requests, whether it stopped, the time it saved."""
    if watch is None:
        return {}
    stopped = runs[-1].stopped
    sent = sum(r.sent for r in runs)
    elapsed = sum(r.duration_s for r in runs)
    return {
        "planned_requests": float(watch.planned),
        "early_stopped": 1.0 if stopped else 0.0,
        "early_stop_saved_s": saved_seconds(watch.planned, sent, elapsed) if stopped else 0.0,
    }


def measure_repeats(
    bench: Bench,
    base_url: str,
    workload: Workload,
    repeats: int,
    options: BenchOptions,
    targets: Sequence[Target] = (),
    converge_on: str | None = None,
) -> Measurement:
    """`repeats` runs on one server, their requests pooled. With `targets`, the exact early stop
    watches the pooled requests as they finish (one watch over every repeat, as the verdict pools
    them, see tuner/trial/stopping.py): once a target can no longer hold, the run in progress is cut
    and the repeats left are skipped; `Measurement.stopped` says why. The metrics also record
    ``measure_s`` (the wall time of the whole measurement, warm-up included), and with a watch
    ``planned_requests``, ``early_stopped`` (1 or 0) and ``early_stop_saved_s`` (the estimated
    time the stop saved). With `converge_on` (a metrics key), `repeats` is a cap: the runs stop
    once that figure's 95% confidence half-width is within 3% of its mean (`--repeats auto`),
    and ``repeats`` in the metrics says how many it took."""
    watch = RunWatch.over(targets, workload, repeats)
    opts = replace(options, stop_when=watch) if watch is not None else options
    began = REAL_CLOCK.monotonic()
    runs: list[BenchRun] = []
    for i in range(repeats):
        w = workload if i == 0 else replace(workload, warmup_requests=0)
        runs.append(bench(base_url, w, opts))
        if runs[-1].stopped or _converged(runs, converge_on, repeats):
            break
    stopped = runs[-1].stopped
    record = {"measure_s": REAL_CLOCK.monotonic() - began, **_stop_record(watch, runs)}
    if converge_on is not None:
        record["repeats"] = float(len(runs))
    if len(runs) == 1:
        metrics = {**runs[0].metrics, **record}
        return Measurement(
            metrics=metrics, runs=[{"repeat": 0, "metrics": runs[0].metrics}], bench_runs=runs, stopped=stopped
        )
    samples = [s for r in runs for s in r.samples]
    # the same keys a single run has: goodput under the targets and llama-server's timing split
    pooled = summarize_requests(
        samples, sum(r.duration_s for r in runs), goodput_fn=options.goodput_fn, slo=options.slo
    )
    pooled.update(server_timing_summary(samples))
    if "spec_acceptance_rate" not in pooled:  # vLLM's counters: the runs' drafted-weighted mean
        pooled.update(_pooled_acceptance(runs))
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
        runs=[{"repeat": i, "metrics": r.metrics} for i, r in enumerate(runs)],
    )


def _pooled_acceptance(runs: list[BenchRun]) -> dict[str, float]:
    """The share of drafted tokens accepted over every run's /metrics deltas (vLLM)."""
    counts = [((r.server_metrics or {}).get("deltas") or {}) for r in runs]
    drafted = sum(d.get("vllm:spec_decode_num_draft_tokens_total", 0.0) for d in counts)
    accepted = sum(d.get("vllm:spec_decode_num_accepted_tokens_total", 0.0) for d in counts)
    return {"spec_acceptance_rate": accepted / drafted} if drafted else {}


def measure_capacity(
    bench: Bench,
    base_url: str,
    workload: Workload,
    targets: list[Target],
    options: BenchOptions,
    on_level: Callable[[float, bool], None] = lambda load, ok: None,
    plan: CapacityPlan = CapacityPlan(),
) -> Measurement:
    """Highest load at which every target holds, each level measured in steady state
    (capacity.py). metrics = those at that load (or at the lowest load tried when none held),
    plus ``capacity`` (0 when even the lowest load breaks a target).

    Doubling finds the first level that breaks; that level is measured once more before it
    counts (`plan.recheck`; a level that holds the second time was noise and the search goes on),
    then bisection narrows the gap, and the final held level is measured once more (a level that
    breaks now steps the capacity down to the next lower held level). A level where the client
    fell behind its schedule is "client-limited": not held, and the search does not go above it
    (more load would only measure the client); ``capacity_client_limited`` then says the capacity is a lower bound.
    Every measurement is one entry of `Measurement.runs`: load, status, met, recheck, ramp_s.
    """
    return _CapacitySearch(bench, base_url, workload, targets, options, on_level, plan).run()


class _CapacitySearch:
    """`measure_capacity`'s state: the levels measured so far and one typical request's duration
    (from the last level with answers: it sizes the next level's ramp and steady state)."""

    def __init__(
        self,
        bench: Bench,
        base_url: str,
        workload: Workload,
        targets: list[Target],
        options: BenchOptions,
        on_level: Callable[[float, bool], None],
        plan: CapacityPlan,
    ):
        self.bench, self.base_url, self.workload, self.targets = bench, base_url, workload, targets
        self.options, self.on_level, self.plan = options, on_level, plan
        self.open_loop = is_open(workload)
        self.results: dict[float, BenchRun] = {}
        self.m = Measurement(metrics={})
        self.typical_s = 0.0

    def measure(self, load: float, recheck: bool) -> LevelStatus:
        w = level_workload(self.workload, load, self.plan, first=not self.results, typical_s=self.typical_s)
        ramp = ramp_for(self.plan, self.typical_s)
        run = self.bench(self.base_url, w, replace(self.options, ramp_s=ramp) if ramp else self.options)
        status = level_status(run, self.targets)
        self.results[load] = run
        self.typical_s = typical_duration_s(run.metrics) or self.typical_s
        self.m.runs.append(
            {
                "load": load,
                "met": status is LevelStatus.HELD,
                "status": status.value,
                "recheck": recheck,
                "ramp_s": ramp,
                "metrics": run.metrics,
            }
        )
        self.m.bench_runs.append(run)
        self.on_level(load, status is LevelStatus.HELD)
        return status

    def run_at(self, load: float, may_recheck: bool = False) -> LevelStatus:
        status = self.measure(load, recheck=False)
        if status is LevelStatus.BROKE and may_recheck and self.plan.recheck:
            status = self.measure(load, recheck=True)  # a break counts only if it breaks again
        return status

    def run(self) -> Measurement:
        lowest = 0.5 if self.open_loop else 1.0
        good, bad, limited = self._double(lowest)
        if bad is not None and good > 0:
            good, limited = self._bisect(good, bad, limited)
        good = self._recheck_held(good)
        chosen = self.results[good] if good > 0 else self.results[lowest]
        m = self.m
        m.capacity = good
        m.chosen = [chosen]
        m.metrics = {**chosen.metrics, "capacity": good}
        if limited:
            m.metrics["capacity_client_limited"] = 1.0
        return m

    def _double(self, lowest: float) -> tuple[float, float | None, bool]:
        """Double the load from `lowest` until a level does not hold: (held, broke, limited)."""
        ceiling = MAX_RATE if self.open_loop else MAX_CONCURRENCY
        good, load = 0.0, lowest
        while load <= ceiling:
            status = self.run_at(load, may_recheck=True)
            if status is not LevelStatus.HELD:
                return good, load, status is LevelStatus.CLIENT_LIMITED
            good, load = load, load * 2
        return good, None, False

    def _recheck_held(self, good: float) -> float:
        """The final held level, measured once more before it counts (`plan.recheck`): a level
        found by bisection held once, and a lucky burst would otherwise set the capacity. When it
        breaks now, step down to the next lower level that held, re-checked in turn (each level
        at most once); 0 when none holds twice."""
        if not self.plan.recheck:
            return good
        checked: set[float] = set()
        while good > 0 and good not in checked:
            checked.add(good)
            if self.measure(good, recheck=True) is LevelStatus.HELD:
                return good
            lower = [r["load"] for r in self.m.runs if r["met"] and r["load"] < good]
            good = max(lower, default=0.0)
        return good

    def _bisect(self, good: float, bad: float, limited: bool) -> tuple[float, bool]:
        """Narrow the gap between the last level that held and the first that broke."""
        resolution = max(0.1 * good, 0.25) if self.open_loop else 1.0
        while bad - good > resolution:
            mid = (good + bad) / 2 if self.open_loop else float(int((good + bad) // 2))
            if mid in (good, bad):
                break
            status = self.run_at(mid)
            if status is LevelStatus.HELD:
                good = mid
            else:
                bad, limited = mid, status is LevelStatus.CLIENT_LIMITED
        return good, limited


class MeteredBench:
    """A `Bench` that meters the energy of every benchmark run's measured phase (energy.py): the
    meter starts at the client's "measuring" phase and stops when the run returns, so warm-up
    (and the server's start-up before it) is left out, as it is of the metrics the joules are
    divided by. Without a meter it only passes the calls on."""

    def __init__(self, bench: Bench, meter: Meter | None):
        self.bench, self.meter = bench, meter
        self.readings: dict[int, EnergyReading | None] = {}  # id(BenchRun) -> its window

    def __call__(self, base_url: str, workload: Workload, options: BenchOptions) -> BenchRun:
        meter = self.meter
        if meter is None:
            return self.bench(base_url, workload, options)
        started = False
        heard = options.on_phase

        def on_phase(phase: str) -> None:
            nonlocal started
            if phase == "measuring" and not started:
                meter.start()
                started = True
            if heard is not None:
                heard(phase)

        reading = None
        try:
            run = self.bench(base_url, workload, replace(options, on_phase=on_phase))
        finally:
            reading = meter.stop() if started else None
        self.readings[id(run)] = reading
        return run


def account(m: Measurement, bench: MeteredBench, usd_per_hour: float | None) -> Measurement:
    """Add energy (over the runs the metrics are from) and cost per 1M tokens to the metrics."""
    if bench.meter is not None:
        runs = m.chosen if m.chosen is not None else m.bench_runs
        reading = combine(bench.readings.get(id(r)) for r in runs)
        m.metrics.update(energy_metrics(reading, m.metrics.get("output_throughput")))
    if usd_per_hour is not None:
        m.metrics.update(cost_metrics(m.metrics, usd_per_hour))
    return m


class WatchedBench:
    """A `Bench` that watches the machine during each benchmark run's measured phase: the window
    opens at the client's "measuring" phase (the warm-up is left out: a config's own start-up
    work is no interference) and closes when the run returns. Each run's `Interference` is kept
    by id(BenchRun); `worst()` is the one a measurement is judged by."""

    def __init__(self, bench: Bench, watch: Watch):
        self.bench, self.watch = bench, watch
        self.seen: dict[int, Interference] = {}  # id(BenchRun) -> its window

    def __call__(self, base_url: str, workload: Workload, options: BenchOptions) -> BenchRun:
        opened = False
        heard = options.on_phase

        def on_phase(phase: str) -> None:
            nonlocal opened
            if phase == "measuring" and not opened:
                self.watch.start()
                opened = True
            if heard is not None:
                heard(phase)

        try:
            run = self.bench(base_url, workload, replace(options, on_phase=on_phase))
        finally:
            window = self.watch.stop() if opened else None
        if window is not None:
            self.seen[id(run)] = window
        return run

    def worst(self, runs: Sequence[BenchRun]) -> Interference | None:
        """The window of `runs` with the most interference: a disturbed one before a quiet one,
        then the most foreign CPU. None when no run was watched."""
        windows = [self.seen[id(r)] for r in runs if id(r) in self.seen]
        if not windows:
            return None
        return max(windows, key=lambda w: (w.disturbed, w.foreign_cores or 0.0))
