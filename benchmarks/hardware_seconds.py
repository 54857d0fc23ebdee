"""Hardware-seconds to a verified answer: kvtune before and after screening, random search and a
vLLM auto_tune-style grid, replayed on a recorded landscape (search_efficiency.py's replay).

    python benchmarks/search_efficiency.py LANDSCAPE --hardware-seconds [--seeds 30] [--ladder 5,10,20,40]

What a user pays is every launch's hardware time until the config kvtune names (after the
verdict's fresh runs, unchanged) is within 5% of the landscape's best. A study names once, at
its end, so each method is replayed per seed at each budget of a ladder (the same ladder for
every method), and a seed's figure is the hardware-seconds of its first study, smallest budget
first, whose named config is within 5% (search, sentinel and verdict runs all counted); a seed
that never gets there on the ladder is censored (inf). Reported: the median over seeds with a
95% bootstrap interval, and each method over random search (ratio of medians, bootstrap
interval over seeds), under two cost scenarios: this host's recorded costs (each
measurement's recorded start-up, warm-up and measurement, cut where kvtune's early stop or
screen would have cut it) and a GPU-like one (start-up 60 s cold / 40 s with a compile-cache
hit, a whole measurement 20 s; search_efficiency.py's GPU_* constants). Also the named config's
regret at a fixed budget, so a faster method is not one that names worse configs.

The methods: kvtune before this change (TPE, informed start, every search trial measured whole),
kvtune now (the same plus the screen: tuner/trial/screening.py, the tuner's own code), random
search through kvtune's verdict (no informed start, no screen), and auto_tune's grid (each
config measured once on a fresh server, the best single figure named among those that met the
targets on their one measurement, no verdict; costs: every config's).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from landscape import Landscape
from replay_rules import outcome_of

WITHIN = 0.05
SCREEN_FRACTION = 0.5  # kvtune's default screen_fraction (study/spec.py)
# name -> (sampler, informed start, screen share)
METHODS: dict[str, tuple[str, bool, float]] = {
    "kvtune before (TPE, informed start)": ("tpe", True, 0.0),
    "kvtune now (+ screen short)": ("tpe", True, SCREEN_FRACTION),
    "random search (+ verdict)": ("random", False, 0.0),
}
RANDOM = "random search (+ verdict)"
AUTOTUNE = "auto_tune grid (each config once)"
SCENARIOS = ("host", "gpu")


@dataclass
class SeedResult:
    """One seed of one method: hardware-seconds to a named config within 5% per scenario (inf:
    never on the ladder), the budget that got there, and the regret at the fixed budget."""

    seconds: dict[str, float]
    budget: float
    regret_at_fixed: float


def autotune(ls: Landscape, seed: int, base_seed: int, gpu_cost: Callable[[dict, bool, set], float]) -> SeedResult:
    """auto_tune's grid: every config once (one recorded measurement each, drawn per seed), the
    baseline first so relative targets resolve as kvtune resolves them; the best single
    figure among those that held the targets is named."""
    rng = random.Random(f"autotune:{base_seed}:{seed}")
    base_cfg = next((c for c in ls.configs if c.baseline), None)
    order = ([base_cfg] if base_cfg else []) + [c for c in ls.configs if not c.baseline]
    host = gpu = 0.0
    compiled: set = set()
    base, best, best_value = None, None, None
    for n, c in enumerate(order):
        m = rng.choice(c.measurements)
        o = outcome_of(ls, n, c, m, c.baseline, base)
        if c.baseline and base is None and o.measured:
            base = o
        host += float(m["cost_s"])
        gpu += gpu_cost(c.params, c.baseline, compiled)
        if o.feasible and o.objective is not None and (best_value is None or ls.better(o.objective, best_value)):
            best, best_value = c, o.objective
    regret = ls.regret(best)
    reached = regret <= WITHIN
    return SeedResult({"host": host if reached else math.inf, "gpu": gpu if reached else math.inf}, len(order), regret)


def median(values: Sequence[float]) -> float:
    return statistics.median_low(sorted(values)) if values else math.inf


def bootstrap(
    values: Sequence[float], reference: Sequence[float] | None = None, n: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile interval of the median of `values` (with `reference`: of the ratio of
    the two medians, each resampled over its own seeds)."""
    rng = random.Random(seed)
    k = len(values)
    stats = []
    for _ in range(n):
        a = median([values[rng.randrange(k)] for _ in range(k)])
        if reference is None:
            stats.append(a)
            continue
        b = median([reference[rng.randrange(len(reference))] for _ in range(len(reference))])
        stats.append(_ratio(a, b))
    stats.sort()
    return stats[int(0.025 * n)], stats[min(n - 1, int(0.975 * n))]


def _ratio(a: float, b: float) -> float:
    if math.isinf(a):
        return math.inf
    return 0.0 if math.isinf(b) else a / b


def first_within(runs_by_budget: dict[int, list], seed_index: int, scenario: str) -> tuple[float, float]:
    """(hardware-seconds, budget) of this seed's first study on the ladder whose named config
    is within 5%; (inf, inf) when none was."""
    for budget in sorted(runs_by_budget):
        r = runs_by_budget[budget][seed_index]
        if r.regret <= WITHIN:
            return (r.hours if scenario == "host" else r.gpu_hours) * 3600, budget
    return math.inf, math.inf


def fmt_s(v: float) -> str:
    if math.isinf(v):
        return "never"
    return f"{v / 3600:.2f} h" if v >= 3600 else f"{v:.0f} s"


def fmt_ratio(v: float) -> str:
    return "inf" if math.isinf(v) else f"{v:.2f}"


def table(results: dict[str, list[SeedResult]], seeds: int, fixed: int, title: str) -> str:
    """The markdown table: per method and scenario the median hardware-seconds [95% interval],
    over random search [95% interval], the median budget that got there, and the named config's
    regret at the fixed budget (median, mean)."""
    ref = results.get(RANDOM)
    out = [
        f"\n{title} ({seeds} seeds; hardware-seconds until the named, verified config is within 5% of the best)\n",
        "| method | scenario | hardware-seconds: median [95% CI] | over random search [95% CI] "
        "| budget that got there (median) | seeds that got there | named regret at "
        f"{fixed} trials: median / mean |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for name, res in results.items():
        for sc in SCENARIOS:
            vals = [r.seconds[sc] for r in res]
            lo, hi = bootstrap(vals)
            over = "-"
            if ref is not None and name != RANDOM:
                rv = [r.seconds[sc] for r in ref]
                rlo, rhi = bootstrap(vals, rv)
                over = f"{fmt_ratio(_ratio(median(vals), median(rv)))} [{fmt_ratio(rlo)}, {fmt_ratio(rhi)}]"
            got = sum(not math.isinf(v) for v in vals)
            regrets = [r.regret_at_fixed for r in res]
            out.append(
                f"| {name} | {sc} | {fmt_s(median(vals))} [{fmt_s(lo)}, {fmt_s(hi)}] | {over} "
                f"| {median([r.budget for r in res]):g} | {got}/{len(res)} "
                f"| {statistics.median(regrets):.1%} / {statistics.fmean(regrets):.1%} |"
            )
    return "\n".join(out) + "\n"
