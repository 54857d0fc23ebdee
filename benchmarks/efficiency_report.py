"""The replay benchmark's report: the markdown tables, the headline and the plot.

Summaries over the simulated studies of search_efficiency.py (its `Run`s): per sampler and
budget the regret of the named best (median, IQR), how often it is truly feasible and the
simulated hours; from each sampler's largest budget, the median trials and hours to come within
5% / 2%. A median that never got there is censored (">B": more than that sampler's budget), and
the headline compares censored figures only as far as their bounds decide the goal.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from landscape import Landscape

if TYPE_CHECKING:
    from search_efficiency import Run

SAMPLERS = ("tpe", "tpe-s3", "tpe-indep", "gp", "random", "qmc", "grid")
CLOSE = (0.05, 0.02)
REFERENCE = "random"  # the headline's yardstick: the default must need at most GOAL of its trials
GOAL = 1 / 3


def _q(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median_reach(runs: list[Run], within: float) -> tuple[float, float]:
    """Median (trials, hours) to come within `within`; inf where the median run never did."""
    reached = [r.reached(within) for r in runs]
    trials = [x[0] if x else math.inf for x in reached]
    hours = [x[1] if x else math.inf for x in reached]
    return statistics.median_low(sorted(trials)), statistics.median_low(sorted(hours))


@dataclass
class Row:
    sampler: str
    informed: bool
    budget: int
    regret_median: float
    regret_q1: float
    regret_q3: float
    feasible: float
    hours: float


def rows(runs: list[Run]) -> list[Row]:
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault((r.sampler, r.informed, r.budget), []).append(r)
    out = []
    for (s, inf, b), rs in groups.items():
        reg = [r.regret for r in rs]
        out.append(
            Row(
                s,
                inf,
                b,
                statistics.median(reg),
                _q(reg, 0.25),
                _q(reg, 0.75),
                sum(r.named_feasible for r in rs) / len(rs),
                statistics.median(r.hours for r in rs),
            )
        )
    return out


def common_top(runs: list[Run]) -> int:
    """The largest budget every sampler ran (random search may also run at a larger one)."""
    tops: dict[str, int] = {}
    for r in runs:
        tops[r.sampler] = max(tops.get(r.sampler, 0), r.budget)
    return min(tops.values())


def reach_table(runs: list[Run]) -> dict[tuple[str, bool], tuple[int, dict[float, tuple[float, float]]]]:
    """Per (sampler, informed): its largest budget and the median (trials, hours) to each of
    `CLOSE` in the runs at that budget."""
    tops: dict[tuple[str, bool], int] = {}
    for r in runs:
        tops[(r.sampler, r.informed)] = max(tops.get((r.sampler, r.informed), 0), r.budget)
    out = {}
    for (s, inf), top in tops.items():
        rs = [r for r in runs if r.sampler == s and r.informed == inf and r.budget == top]
        out[(s, inf)] = (top, {w: median_reach(rs, w) for w in CLOSE})
    return out


def _inf(s: str, informed: bool) -> str:
    return "n/a" if s == "grid" else "on" if informed else "off"


def _n(x: float, top: int, fmt: str = "{:.0f}") -> str:
    return f">{top}" if math.isinf(x) else fmt.format(x)


def _order(sampler: str) -> int:
    return SAMPLERS.index(sampler) if sampler in SAMPLERS else 99


def markdown(ls: Landscape, runs: list[Run], seeds: int, command: str) -> str:
    best = ls.optimum()
    n_meas = sum(len(c.measurements) for c in ls.configs)
    lines = [
        f"Landscape: `{Path(ls.path).name}`: {len(ls.configs)} configs, {n_meas} measurements, "
        f"{sum(c.truly_feasible for c in ls.configs)} truly feasible under "
        f"{', '.join(ls.header['targets'])}; optimum {ls.objective_key} {best.true_objective:.3g}. "
        f"{seeds} seeds per cell. Command: `{command}`",
        "",
        "| sampler | informed start | budget | regret of named best: median [IQR] | named best truly feasible | median simulated hours |",
        "|---|---|---:|---|---:|---:|",
    ]
    for r in sorted(rows(runs), key=lambda r: (_order(r.sampler), not r.informed, r.budget)):
        lines.append(
            f"| {r.sampler} | {_inf(r.sampler, r.informed)} | {r.budget} | "
            f"{r.regret_median:.1%} [{r.regret_q1:.1%}, {r.regret_q3:.1%}] | "
            f"{r.feasible:.0%} | {r.hours:.2f} |"
        )
    lines += [
        "",
        "Median trials (and simulated hours) until the search has measured a truly feasible "
        'config within 5% / 2% of the optimum, from each sampler\'s largest budget (">B": the '
        "median run never did within its budget B):",
        "",
        "| sampler | informed start | budget | trials to 5% | hours to 5% | trials to 2% | hours to 2% |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (s, inf), (top, d) in sorted(reach_table(runs).items(), key=lambda x: (_order(x[0][0]), not x[0][1])):
        cells = [f"{_n(t, top)} | {'-' if math.isinf(h) else f'{h:.2f}'}" for t, h in (d[w] for w in CLOSE)]
        lines.append(f"| {s} | {_inf(s, inf)} | {top} | {' | '.join(cells)} |")
    reused = sum(r.reused for r in runs)
    if reused:
        lines += [
            "",
            f"{reused} draws repeated a recorded measurement: a config was measured more "
            f"often than the landscape recorded it.",
        ]
    lines += early_stop_lines(runs)
    return "\n".join(lines) + "\n"


def early_stop_lines(runs: list[Run]) -> list[str]:
    """What kvtune's exact early stop saved at the largest budget every sampler ran: the same
    draws charged with the rule (as kvtune runs) and with every measurement run whole."""
    top = common_top(runs)
    lines = [
        "",
        f"Early stop (budget {top} runs; the same draws charged with kvtune's exact early "
        f"stop and with every measurement run whole; it changes what a trial costs, never its "
        f"verdict):",
        "",
        "| sampler | informed start | trials stopped (median) | hours with early stop | "
        "hours without | time of infeasible trials saved |",
        "|---|---|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, bool], list[Run]] = {}
    for r in runs:
        if r.budget == top:
            groups.setdefault((r.sampler, r.informed), []).append(r)
    for (s, inf), rs in sorted(groups.items(), key=lambda x: (_order(x[0][0]), not x[0][1])):
        whole = sum(r.infeasible_no_stop_s for r in rs)
        saved = 1 - sum(r.infeasible_s for r in rs) / whole if whole else 0.0
        lines.append(
            f"| {s} | {_inf(s, inf)} | {statistics.median(r.stopped for r in rs):.0f} | "
            f"{statistics.median(r.hours for r in rs):.2f} | "
            f"{statistics.median(r.hours_no_stop for r in rs):.2f} | {saved:.0%} |"
        )
    return lines


def goal_met(
    default: float, default_budget: int, reference: float, reference_budget: int, goal: float = GOAL
) -> bool | None:
    """Does the default need at most `goal` of the reference's trials? None when the figures do
    not show it either way. A median that never got there (inf) is censored: only "more than
    its budget" is known, so it decides the question only through that bound."""
    d_known, r_known = not math.isinf(default), not math.isinf(reference)
    if d_known and r_known:
        return default <= goal * reference
    if d_known:  # reference > its budget: the ratio is below default / reference_budget
        return True if default <= goal * reference_budget else None
    if r_known:  # default > its budget: the ratio is above default_budget / reference
        return False if default_budget >= goal * reference else None
    return None


def ratio_text(default: float, default_budget: int, reference: float, reference_budget: int) -> str:
    """``ratio 0.54``, ``ratio < 0.60`` or ``ratio > 0.40`` as far as the figures measure it."""
    if not math.isinf(default) and not math.isinf(reference):
        return f"ratio {default / reference:.2f}"
    if not math.isinf(default):
        return f"ratio < {default / reference_budget:.2f}"
    if not math.isinf(reference):
        return f"ratio > {default_budget / reference:.2f}"
    return "ratio unknown"


def headline(runs: list[Run], default: str, reference: str = REFERENCE) -> str:
    """Does the default reach 5% in at most a third of random search's trials? Yes or no only
    when the measured figures show it; a censored figure that leaves it open is "not shown"."""
    reach = reach_table(runs)
    parts = []
    for inf in (True, False):
        if (default, inf) not in reach or (reference, inf) not in reach:
            continue
        (bd, d_reach), (br, r_reach) = reach[(default, inf)], reach[(reference, inf)]
        d, r = d_reach[0.05][0], r_reach[0.05][0]
        met = goal_met(d, bd, r, br)
        verdict = {True: "yes", False: "no", None: "not shown"}[met]
        hint = ""
        if met is None and not math.isinf(d):
            hint = f"; {reference} would need a budget of at least {math.ceil(d / GOAL)} (--reference-budget)"
        elif met is None:
            hint = f"; {default} did not get there within {bd}"
        parts.append(
            f"informed start {'on' if inf else 'off'}: {default} {_n(d, bd)} vs {reference} "
            f"{_n(r, br)} median trials to within 5% ({ratio_text(d, bd, r, br)}; {verdict}: "
            f"the goal is <= 1/3{hint})"
        )
    return "; ".join(parts)


def plot(runs: list[Run], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = common_top(runs)  # random's reference budget, when larger, would stretch the axis
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, inf in zip(axes, (True, False)):
        for s in sorted({r.sampler for r in runs}, key=_order):
            rs = sorted(
                (r for r in rows(runs) if r.sampler == s and (r.informed == inf or s == "grid") and r.budget <= top),
                key=lambda r: r.budget,
            )
            if not rs:
                continue
            x = [r.budget for r in rs]
            ax.plot(x, [100 * r.regret_median for r in rs], marker="o", label=s)
            ax.fill_between(x, [100 * r.regret_q1 for r in rs], [100 * r.regret_q3 for r in rs], alpha=0.12)
        ax.set_title(f"informed start {'on' if inf else 'off'}")
        ax.set_xlabel("trials (measured configs, baseline included)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("regret of the named best, % (median, IQR)")
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
