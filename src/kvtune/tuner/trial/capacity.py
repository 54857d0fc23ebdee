"""The capacity objective: the most load one running server holds with every target met.

One search per workload, all judging a level the same way (`level_status`: client-limited when
the open loop fell behind its schedule, since the server was not offered that load; else held
when every target is met). A break of the first level that breaks is measured once more before
it counts, and the final held level once more before it is reported (a break then steps down to
the next lower held level); a client-limited level is not held, and nothing above it is tried.

- Users (closed loop) or a request rate (open loop), `measure_capacity`: double the load until a
  target breaks (or up to a load known to break, `CapacityPlan.ceiling`), then bisect between
  the last level that held and the first that broke, at most `max_levels` levels. Each level
  reads the steady state (`level_workload`): a naive level misleads both ways (all users at once
  make the first burst dominate TTFT p95; an open loop that sends a fixed count finishes sooner
  the higher the rate, before queues build). So a level warms up at that level first (at least
  `warmup_waves` rounds of its users; in open loop as many users as the rate keeps busy, rate x
  typical request duration), ramps its users in over one typical request duration, and measures
  at least `waves` rounds of its users, or in open loop for max(`min_open_duration_s`,
  num_requests / rate), so a higher rate is not a shorter run.
- A trace, `measure_trace_capacity`: the one load knob a trace leaves is its replay speed
  (`Workload.trace_speed`: 2 sends it in half the time), the capacity that multiple of its
  recorded rate (study/capacity_text.py). `search_speed` brackets from 1x ("does this box serve
  my traffic?"), doubling while it holds up to 64x (faster excerpts are too short for a steady
  state: a lower bound) or halving while it breaks down to 0.25x (below it, capacity 0), then
  bisects to within 10% of the held speed (finer is inside a replay's noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Sequence

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.objectives.targets import Target
from kvtune.study.capacity_text import TRACE_LOWEST_KEY, TRACE_SPEED_KEY, TRACE_UNIT
from kvtune.tuner.trial.measure import Bench, Measurement
from kvtune.workload import Workload

MAX_CONCURRENCY = 256
MAX_RATE = 1000.0


class LevelStatus(Enum):
    """A load level's verdict; the value is what results.json's ``load_levels`` say."""

    HELD = "held"
    BROKE = "broke"
    CLIENT_LIMITED = "client-limited"


@dataclass(frozen=True)
class CapacityPlan:
    """How each level is measured. The defaults are kvtune's; tests shrink the open-loop floor."""

    waves: int = 4  # closed loop: measured requests >= waves x users
    warmup_waves: int = 1  # warm-up requests >= warmup_waves x users, at every level
    min_open_duration_s: float = 20.0  # open loop: each level sends at least this long
    ramp: bool = True  # users ramp in over one typical request duration
    recheck: bool = True  # the first breaking level is measured once more
    ceiling: float | None = None  # a load known to break (a miss's own): stay below, never measure it
    max_levels: int | None = None  # levels at most, re-checks included; cut short: ``capacity_bounded``


def level_status(run: BenchRun, targets: Sequence[Target]) -> LevelStatus:
    """One level's verdict: client-limited when the open loop fell behind its schedule (the server
    was not offered that load, so the level says nothing about it), else held when every target
    is met. The user-count / rate search and the trace-speed search judge levels the same way."""
    if run.fell_behind:
        return LevelStatus.CLIENT_LIMITED
    return LevelStatus.HELD if all(t.met(run.metrics) for t in targets) else LevelStatus.BROKE


def is_open(w: Workload) -> bool:
    return w.mode == "open"


def lowest_load(w: Workload) -> float:
    """The first level a search measures: one user, or half a request per second."""
    return 0.5 if is_open(w) else 1.0


def typical_duration_s(metrics: dict[str, float] | None) -> float:
    """One typical request's duration (mean E2EL of the successful requests), 0 when unknown."""
    v = (metrics or {}).get("mean_e2el_ms")
    return v / 1000.0 if v is not None and math.isfinite(v) and v > 0 else 0.0


def level_workload(w: Workload, load: float, plan: CapacityPlan, first: bool, typical_s: float) -> Workload:
    """The study's workload at `load` (users in closed loop, req/s in open loop), measured after
    a warm-up at that level. The first level also keeps the workload's own warm-up size."""
    own_warmup = w.warmup_requests if first else 0
    changes: dict[str, Any] = {}
    if is_open(w):
        users = w.concurrency
        if typical_s > 0:  # Little's law: requests in flight at this rate
            users = min(MAX_CONCURRENCY, max(1, math.ceil(load * typical_s)))
        changes.update(rate=load, concurrency=users, warmup_requests=max(own_warmup, plan.warmup_waves * users))
        if w.duration_s is None:
            changes["duration_s"] = max(plan.min_open_duration_s, w.num_requests / load)
    else:
        users = int(load)
        changes.update(
            concurrency=users,
            warmup_requests=max(own_warmup, plan.warmup_waves * users),
            num_requests=max(w.num_requests, plan.waves * users),
        )
    return replace(w, **changes)


def ramp_for(plan: CapacityPlan, typical_s: float) -> float:
    """Seconds over which a level's users start (0: all at once)."""
    return typical_s if plan.ramp else 0.0


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
    (`level_workload`). metrics = those at that load (or at the lowest load tried when none held),
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
        self.bounded = False  # the level cap ended the search before its resolution

    def room(self) -> bool:
        """Whether another level fits under `plan.max_levels`, one kept for the final re-check."""
        cap, need = self.plan.max_levels, len(self.m.runs) + (2 if self.plan.recheck else 1)
        self.bounded = self.bounded or (cap is not None and need > cap)
        return not self.bounded

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
        lowest = lowest_load(self.workload)
        assert self.plan.ceiling is None or self.plan.ceiling > lowest, "no level to measure below the ceiling"
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
        m.metrics.update({"capacity_bounded": 1.0} if self.bounded else {})
        return m

    def _double(self, lowest: float) -> tuple[float, float | None, bool]:
        """Double the load from `lowest` until a level does not hold: (held, broke, limited).
        A known breaking load (`plan.ceiling`) ends the doubling below it, as the break."""
        ceiling = MAX_RATE if self.open_loop else MAX_CONCURRENCY
        good, load, known = 0.0, lowest, self.plan.ceiling
        while load <= ceiling:
            if known is not None and load >= known:
                return good, known, False
            if good > 0 and not self.room():
                return good, None, False
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
            if mid in (good, bad) or not self.room():
                break
            status = self.run_at(mid)
            if status is LevelStatus.HELD:
                good = mid
            else:
                bad, limited = mid, status is LevelStatus.CLIENT_LIMITED
        return good, limited


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
