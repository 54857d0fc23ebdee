"""How one load level of the capacity search is measured, so it reads the steady state.

A level measured the naive way misleads both ways: all users starting at once make the first
burst of prompts dominate TTFT p95 (capacity under-estimated), and an open loop that sends a fixed
count finishes sooner the higher the rate, before queues build (over-estimated). So each level:

- warms up at that level first (at least `warmup_waves` rounds of its users; in open loop a closed
  warm-up with as many users as the rate keeps busy, rate x typical request duration);
- ramps its users in over one typical request duration (the last level's mean E2EL), not at once;
- measures at least `waves` rounds of its users (closed loop), or for a duration (open loop:
  max(`min_open_duration_s`, num_requests / rate), so a higher rate is not a shorter run);
- is judged held, broke, or client-limited (the open-loop client fell behind its schedule: the
  server was not offered that load, so the level says nothing about the server and is not held).

Pure: the search itself (which levels, the re-check of the first break) is `measure_capacity` in
measure.py; this module only shapes a level's workload and names its verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Sequence

from kvtune.bench.options import BenchRun
from kvtune.objectives.targets import Target
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


def level_status(run: BenchRun, targets: Sequence[Target]) -> LevelStatus:
    """One level's verdict: client-limited when the open loop fell behind its schedule (the server
    was not offered that load, so the level says nothing about it), else held when every target
    is met. The user-count / rate search and the trace-speed search judge levels the same way."""
    if run.fell_behind:
        return LevelStatus.CLIENT_LIMITED
    return LevelStatus.HELD if all(t.met(run.metrics) for t in targets) else LevelStatus.BROKE


def is_open(w: Workload) -> bool:
    return w.mode == "open"


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
