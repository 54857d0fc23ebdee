"""Capacity on a trace: the fastest replay of the trace at which every target holds.

A trace fixes its arrivals and lengths, so "more users" or "a higher rate" do not apply; the one
load knob left is the replay's speed (`Workload.trace_speed`: 2 sends the same requests in half
the time). The capacity is that speed factor, a multiple of the trace's recorded rate:
"holds this trace at 2.5x its recorded rate with every target met" (study/capacity_text.py says
it so).

The bracket (`SpeedPlan`), and why:

- start at 1x, the trace as recorded: the question an operator asks first is "does this box
  serve my traffic?", and 1x answers it with the first measurement;
- when 1x holds, double (2x, 4x, ...) until a target breaks or the cap (64x: an excerpt's
  requests then arrive within a second or two, a replay that short says little about steady
  state; reaching it is flagged as a lower bound);
- when 1x breaks, halve (0.5x, 0.25x) down to the floor of 0.25x: each halving doubles the
  replay's wall time, and a config that cannot serve a quarter of the recorded rate is
  infeasible here (capacity 0) whatever its exact figure;
- then bisect between the fastest speed that held and the slowest that broke until the gap is
  within 10% of the held speed (`resolution`): finer would be inside the run-to-run noise of a
  short replay, and it costs about three levels after the bracket.

As the user-count search does (measure.py), a break of the first bracket level that breaks is
measured once more before it counts, and the final held speed is measured once more before it
is reported (a break then steps down to the next lower held speed). A level where the client fell
behind the replay's schedule is client-limited: not held, and nothing faster is tried. Every
level replays the same requests (the same work, only the clock differs), the workload's own
warm-up before the first level only. `search_speed` is the pure search over a probe; the trial's
glue is `measure_trace_capacity`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.objectives.targets import Target
from kvtune.study.capacity_text import TRACE_LOWEST_KEY, TRACE_SPEED_KEY, TRACE_UNIT
from kvtune.tuner.trial.capacity import LevelStatus, level_status
from kvtune.tuner.trial.measure import Bench, Measurement
from kvtune.workload import Workload

# (speed, is this a re-check) -> the level's verdict
Probe = Callable[[float, bool], LevelStatus]


@dataclass(frozen=True)
class SpeedPlan:
    """The bracket and resolution of the speed search (see the module's docstring for why)."""

    start: float = 1.0
    cap: float = 64.0
    floor: float = 0.25
    resolution: float = 0.10  # stop when (broke - held) <= resolution x held
    recheck: bool = True


@dataclass
class SpeedFound:
    """The search's answer: the speed held (0: none), and whether it is a lower bound."""

    held: float
    client_limited: bool = False
    at_cap: bool = False
    lowest: float = 0.0  # the slowest speed tried
    held_levels: set[float] = field(default_factory=set)


def search_speed(probe: Probe, plan: SpeedPlan = SpeedPlan()) -> SpeedFound:
    """The fastest speed at which `probe` holds: bracket from `plan.start` (doubling up or halving
    down), bisect to `plan.resolution`, re-check the speed found."""
    found = SpeedFound(held=0.0, lowest=plan.start)

    def run_at(speed: float, may_recheck: bool) -> LevelStatus:
        found.lowest = min(found.lowest, speed)
        status = probe(speed, False)
        if status is LevelStatus.BROKE and may_recheck and plan.recheck:
            status = probe(speed, True)  # a break counts only when it breaks again
        if status is LevelStatus.HELD:
            found.held_levels.add(speed)
        return status

    good, bad, at_bad = _bracket(run_at, plan, found)
    while bad is not None and good > 0 and bad - good > plan.resolution * good:
        mid = (good + bad) / 2
        status = run_at(mid, False)
        if status is LevelStatus.HELD:
            good = mid
        else:
            bad, at_bad = mid, status
    found.client_limited = bad is not None and at_bad is LevelStatus.CLIENT_LIMITED
    found.held = _recheck_held(probe, plan, good, found.held_levels)
    return found


def _bracket(
    run_at: Callable[[float, bool], LevelStatus], plan: SpeedPlan, found: SpeedFound
) -> tuple[float, float | None, LevelStatus]:
    """(held, broke, the status at `broke`): doubling from `start` while it holds, up to the
    cap, or halving from it to the floor while it breaks. Only the first break is re-checked."""
    speed = plan.start
    status = run_at(speed, True)
    if status is LevelStatus.HELD:
        good = speed
        while speed * 2 <= plan.cap:
            speed *= 2
            status = run_at(speed, True)
            if status is not LevelStatus.HELD:
                return good, speed, status
            good = speed
        found.at_cap = True
        return good, None, status
    bad = speed
    while speed / 2 >= plan.floor:
        speed /= 2
        next_status = run_at(speed, False)
        if next_status is LevelStatus.HELD:
            return speed, bad, status
        bad, status = speed, next_status
    return 0.0, bad, status


def _recheck_held(probe: Probe, plan: SpeedPlan, good: float, held: set[float]) -> float:
    """The speed found, measured once more before it counts: a bisected level held once, and a
    lucky replay would otherwise set the capacity. A break steps down to the next lower speed
    that held, re-checked in turn (each at most once); 0 when none holds twice."""
    if not plan.recheck:
        return good
    checked: set[float] = set()
    while good > 0 and good not in checked:
        checked.add(good)
        if probe(good, True) is LevelStatus.HELD:
            return good
        good = max((s for s in held if s < good), default=0.0)
    return good


def measure_trace_capacity(
    bench: Bench,
    base_url: str,
    workload: Workload,
    targets: list[Target],
    options: BenchOptions,
    on_level: Callable[[float, bool], None] = lambda speed, ok: None,
    plan: SpeedPlan = SpeedPlan(),
) -> Measurement:
    """The trace's capacity on one running server: `search_speed` with each probe a replay at
    that speed. metrics = those of the speed found (or the slowest tried when none held), plus
    ``capacity`` and `TRACE_SPEED_KEY` (the speed factor, 0 when none held), `TRACE_LOWEST_KEY`,
    ``capacity_rechecked``, and ``capacity_at_cap`` / ``capacity_client_limited`` when the figure
    is a lower bound. Every replay is one entry of `Measurement.runs`: load (the speed), unit,
    status, met, recheck."""
    m = Measurement(metrics={})
    latest: dict[float, BenchRun] = {}

    def probe(speed: float, recheck: bool) -> LevelStatus:
        warmup = workload.warmup_requests if not m.bench_runs else 0  # the server is warm after
        run = bench(base_url, replace(workload, trace_speed=speed, warmup_requests=warmup), options)
        status = level_status(run, targets)
        latest[speed] = run
        m.bench_runs.append(run)
        m.runs.append(
            {
                "load": speed,
                "unit": TRACE_UNIT,
                "met": status is LevelStatus.HELD,
                "status": status.value,
                "recheck": recheck,
                "metrics": run.metrics,
            }
        )
        on_level(speed, status is LevelStatus.HELD)
        return status

    found = search_speed(probe, plan)
    chosen = latest[found.held] if found.held > 0 else latest[min(latest)]
    m.capacity, m.chosen = found.held, [chosen]
    m.metrics = {**chosen.metrics, "capacity": found.held, TRACE_SPEED_KEY: found.held, TRACE_LOWEST_KEY: found.lowest}
    m.metrics["capacity_rechecked"] = 1.0 if plan.recheck and found.held > 0 else 0.0
    if found.at_cap:
        m.metrics["capacity_at_cap"] = 1.0
    if found.client_limited:
        m.metrics["capacity_client_limited"] = 1.0
    return m
