"""The replay benchmark's report: the markdown tables, the headline and the plot.

Summaries over the simulated studies of search_efficiency.py (its `Run`s): per sampler and
budget the regret of the named best (median, IQR), how often it is truly feasible and the
simulated hours; from the largest budget, the median trials and hours to come within 5% / 2%.
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
        out.append(Row(s, inf, b, statistics.median(reg), _q(reg, 0.25), _q(reg, 0.75),
                       sum(r.named_feasible for r in rs) / len(rs), statistics.median(r.hours for r in rs)))
    return out


def reach_table(runs: list[Run]) -> dict[tuple[str, bool], dict[float, tuple[float, float]]]:
    top = max(r.budget for r in runs)
    out: dict[tuple[str, bool], dict[float, tuple[float, float]]] = {}
    for r in runs:
        if r.budget == top:
            out.setdefault((r.sampler, r.informed), {})
    for (s, inf) in out:
        rs = [r for r in runs if r.sampler == s and r.informed == inf and r.budget == top]
        out[(s, inf)] = {w: median_reach(rs, w) for w in CLOSE}
    return out


def _inf(s: str, informed: bool) -> str:
    return "n/a" if s == "grid" else "on" if informed else "off"


def _n(x: float, top: int, fmt: str = "{:.0f}") -> str:
    return f">{top}" if math.isinf(x) else fmt.format(x)


def markdown(ls: Landscape, runs: list[Run], seeds: int, command: str) -> str:
    top = max(r.budget for r in runs)
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
    for r in sorted(rows(runs), key=lambda r: (SAMPLERS.index(r.sampler) if r.sampler in SAMPLERS else 99,
                                                 not r.informed, r.budget)):
        lines.append(f"| {r.sampler} | {_inf(r.sampler, r.informed)} | {r.budget} | "
                     f"{r.regret_median:.1%} [{r.regret_q1:.1%}, {r.regret_q3:.1%}] | "
                     f"{r.feasible:.0%} | {r.hours:.2f} |")
    lines += ["", f"Median trials (and simulated hours) until the search has measured a truly feasible "
              f"config within 5% / 2% of the optimum (budget {top} runs):", "",
              "| sampler | informed start | trials to 5% | hours to 5% | trials to 2% | hours to 2% |",
              "|---|---|---:|---:|---:|---:|"]
    for (s, inf), d in sorted(reach_table(runs).items(),
                              key=lambda x: (SAMPLERS.index(x[0][0]) if x[0][0] in SAMPLERS else 99, not x[0][1])):
        t5, h5 = d[0.05]
        t2, h2 = d[0.02]
        lines.append(f"| {s} | {_inf(s, inf)} | {_n(t5, top)} | {_n(h5, top, '{:.2f}') if not math.isinf(h5) else '-'} | "
                     f"{_n(t2, top)} | {_n(h2, top, '{:.2f}') if not math.isinf(h2) else '-'} |")
    lines += early_stop_lines(runs)
    return "\n".join(lines) + "\n"


def early_stop_lines(runs: list[Run]) -> list[str]:
    """What kvtune's exact early stop saved at the largest budget: the same draws charged with
    the rule (as kvtune runs) and with every measurement run whole."""
    top = max(r.budget for r in runs)
    lines = ["", f"Early stop (budget {top} runs; the same draws charged with kvtune's exact early "
             f"stop and with every measurement run whole; it changes what a trial costs, never its "
             f"verdict):", "",
             "| sampler | informed start | trials stopped (median) | hours with early stop | "
             "hours without | time of infeasible trials saved |",
             "|---|---|---:|---:|---:|---:|"]
    groups: dict[tuple[str, bool], list[Run]] = {}
    for r in runs:
        if r.budget == top:
            groups.setdefault((r.sampler, r.informed), []).append(r)
    for (s, inf), rs in sorted(groups.items(), key=lambda x: (SAMPLERS.index(x[0][0])
                                                              if x[0][0] in SAMPLERS else 99, not x[0][1])):
        whole = sum(r.infeasible_no_stop_s for r in rs)
        saved = 1 - sum(r.infeasible_s for r in rs) / whole if whole else 0.0
        lines.append(f"| {s} | {_inf(s, inf)} | {statistics.median(r.stopped for r in rs):.0f} | "
                     f"{statistics.median(r.hours for r in rs):.2f} | "
                     f"{statistics.median(r.hours_no_stop for r in rs):.2f} | {saved:.0%} |")
    return lines


def headline(runs: list[Run], default: str) -> str:
    """Does the default reach 5% in at most a third of random search's trials?"""
    reach = reach_table(runs)
    top = max(r.budget for r in runs)
    parts = []
    for inf in (True, False):
        if (default, inf) not in reach or ("random", inf) not in reach:
            continue
        d, r = reach[(default, inf)][0.05][0], reach[("random", inf)][0.05][0]
        verdict = "yes" if not math.isinf(d) and d <= r / 3 else "no"
        parts.append(f"informed start {'on' if inf else 'off'}: {default} {_n(d, top)} vs random "
                     f"{_n(r, top)} median trials to within 5% ({verdict}: the goal is <= 1/3)")
    return "; ".join(parts)


def plot(runs: list[Run], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, inf in zip(axes, (True, False)):
        for s in sorted({r.sampler for r in runs}, key=lambda s: SAMPLERS.index(s) if s in SAMPLERS else 99):
            rs = sorted((r for r in rows(runs) if r.sampler == s and (r.informed == inf or s == "grid")),
                        key=lambda r: r.budget)
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
