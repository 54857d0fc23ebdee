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
targets on their one measurement, no verdict; costs: every config's). Two more bound what a
search can do: the slot ladder (issue 38 item 3: the informed start at every slot count, in the
order the decode ceiling ranks them, replay_rules.slot_ladder) and the perfect search (the
landscape's optimum measured right after the baseline, then the same verdict), whose ratio to
random search is the lowest any search reaches through this verdict. Each study's sentinel and
verdict runs are counted apart, so the table says what share of the bill is the proof.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Sequence

from landscape import Landscape
from replay_rules import outcome_of

WITHIN = 0.05
SCREEN_FRACTION = 0.5  # kvtune's default screen_fraction (study/spec.py)


class Start(str, Enum):
    """What a replayed study measures right after the baseline, before the sampler proposes."""

    NONE = "none"
    INFORMED = "informed"  # kvtune's informed start (launchers' preferred rules)
    SLOT_LADDER = "slot ladder"  # the informed start at every slot count, ceiling-ordered (item 3)
    OPTIMUM = "optimum"  # the landscape's best config: a search that cannot do better (the bound)


@dataclass(frozen=True)
class Method:
    """A search as the replay runs it: Optuna's `sampler`, its `start`, kvtune's `screen`
    share, and budgets tried before the ladder's (the bound starts at 2: baseline + optimum)."""

    sampler: str
    start: Start
    screen: float = 0.0
    first_budgets: tuple[int, ...] = ()


RANDOM = "random search (+ verdict)"
BOUND = "perfect search (the optimum measured first) + verdict"
METHODS: dict[str, Method] = {
    "kvtune before (TPE, informed start)": Method("tpe", Start.INFORMED),
    "kvtune now (+ screen short)": Method("tpe", Start.INFORMED, SCREEN_FRACTION),
    "kvtune + slot ladder (item 3, replay only)": Method("tpe", Start.SLOT_LADDER, SCREEN_FRACTION),
    RANDOM: Method("random", Start.NONE),
    BOUND: Method("tpe", Start.OPTIMUM, SCREEN_FRACTION, first_budgets=(2,)),
}
AUTOTUNE = "auto_tune grid (each config once)"
SCENARIOS = ("host", "gpu")


@dataclass
class SeedResult:
    """One seed of one method: hardware-seconds to a named config within 5% per scenario (inf:
    never on the ladder), the budget that got there, the regret at the fixed budget, and the
    share of the successful study's seconds its sentinel and verdict runs took (per scenario)."""

    seconds: dict[str, float]
    budget: float
    regret_at_fixed: float
    verdict_share: dict[str, float] = field(default_factory=dict)


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


def first_within(runs_by_budget: dict[int, list], seed_index: int, scenario: str) -> tuple[float, float, float]:
    """(hardware-seconds, budget, the sentinel's and verdict's share of those seconds) of this
    seed's first study on the ladder whose named config is within 5%; (inf, inf, nan) when
    none was."""
    for budget in sorted(runs_by_budget):
        r = runs_by_budget[budget][seed_index]
        if r.regret <= WITHIN:
            total = (r.hours if scenario == "host" else r.gpu_hours) * 3600
            proof = r.verdict_s if scenario == "host" else r.verdict_gpu_s
            return total, budget, (proof / total if total > 0 else math.nan)
    return math.inf, math.inf, math.nan


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
        "| budget that got there (median) | seeds that got there | sentinel + verdict share (median) "
        f"| named regret at {fixed} trials: median / mean |",
        "|---|---|---|---|---:|---:|---:|---|",
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
            shares = [x for x in (r.verdict_share.get(sc, math.nan) for r in res) if not math.isnan(x)]
            share = f"{statistics.median(shares):.0%}" if shares else "-"
            out.append(
                f"| {name} | {sc} | {fmt_s(median(vals))} [{fmt_s(lo)}, {fmt_s(hi)}] | {over} "
                f"| {median([r.budget for r in res]):g} | {got}/{len(res)} | {share} "
                f"| {statistics.median(regrets):.1%} / {statistics.fmean(regrets):.1%} |"
            )
    return "\n".join(out) + "\n" + bound_line(results)


def bound_line(results: dict[str, list[SeedResult]]) -> str:
    """What no search can beat through this verdict: the perfect search's ratio to random
    search per scenario, and whether the goal (at most 1/3) lies above it."""
    if BOUND not in results or RANDOM not in results:
        return ""
    parts = []
    for sc in SCENARIOS:
        vals, rv = [r.seconds[sc] for r in results[BOUND]], [r.seconds[sc] for r in results[RANDOM]]
        lo, hi = bootstrap(vals, rv)
        ratio = _ratio(median(vals), median(rv))
        reach = "below 1/3 is within reach" if lo <= 1 / 3 else "no search reaches 1/3 through this verdict"
        parts.append(f"{sc} {fmt_ratio(ratio)} [{fmt_ratio(lo)}, {fmt_ratio(hi)}] ({reach})")
    return "\nThe bound (a search that measures the optimum first, over random search): " + "; ".join(parts) + "\n"
