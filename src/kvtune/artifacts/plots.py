"""The report's plots, as inline SVG: improvement, Pareto set, importance, slices, history.

People read a tuning result by looking at it, so the report is mostly these plots. They are drawn
with matplotlib's SVG backend through `Figure` (never pyplot, so no global backend state), with
text kept as text and every id salted per plot so many plots live in one document. Each plot
takes the trials as `TrialOutcome`s and the overview of `artifacts.overview`, so it shows the
same best, baseline and Pareto set as `kvtune show`; importance is drawn from what the tuner
stored in results.json. A plot with nothing to show is a short note instead.
"""

from __future__ import annotations

import html
import io
import math
import re
from typing import Any, Sequence

from kvtune.errors import KvtuneError
from kvtune.kinds import Direction
from kvtune.objectives.objective import Objective
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome

BLUE, GREY, GREEN, ORANGE, RED = "#2b6cb0", "#a0a0a0", "#1a7f37", "#d9730d", "#cf222e"
PLOTS = ("plot-improvement", "plot-pareto", "plot-importance", "plot-slice", "plot-history")
LABELS = {"output_throughput": "output tok/s", "request_throughput": "requests/s"}
AXES = {"output_throughput": "output throughput (tok/s)"}


# ---- small helpers -------------------------------------------------------------------------
def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fmt(v: Any, key: str = "") -> str:
    if not num(v):
        return "–"
    if key.endswith("_ms"):
        return f"{v:,.0f} ms" if abs(v) >= 10 else f"{v:.1f} ms"
    if key == "error_rate":
        return f"{v * 100:.1f}%"
    return f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}"


def objective_label(o: Objective) -> str:
    """How an objective is named on axes and cards, e.g. ``output tok/s``, ``TTFT p95 (ms)``."""
    if o.name in LABELS:
        return LABELS[o.name]
    if o.key.endswith("_ms"):
        metric, stat = o.name.rsplit("_", 1)
        return f"{metric.upper()} {stat} (ms)"
    return o.name


def y_value(o: TrialOutcome) -> float | None:
    """The trial's (first) objective, when it was measured."""
    return float(o.objective) if num(o.objective) and o.metrics else None


def _svg(fig: Any, pid: str, caption: str) -> str:
    """The figure as inline SVG (text kept as text; ids salted per plot so they stay unique)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": pid}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    # matplotlib numbers its ids per figure (figure_1, patch_1, ...): prefix them with the plot's
    # id so they stay unique in one document, and the references with them
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{pid}-{m.group(1)}"', svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{pid}-{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{pid}-{m.group(1)})", svg)
    m = re.match(r'<svg([^>]*?) width="([0-9.]+)pt" height="[^"]*"', svg)
    if m:  # drop the fixed size; keep the natural width as a maximum so text stays legible
        svg = (
            f'<svg{m.group(1)} role="img" aria-label="{esc(caption)}" '
            f'style="max-width:{float(m.group(2)) * 4 / 3:.0f}px"' + svg[m.end() :]
        )
    return f'<figure class="plot" id="{pid}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def _figure(w: float, h: float) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # matplotlib is a dependency; say so if it is missing
        raise KvtuneError("the HTML report needs matplotlib: pip install matplotlib") from e
    fig = Figure(figsize=(w, h), dpi=100)
    fig.set_facecolor("white")
    return fig


def note(pid: str, text: str) -> str:
    return f'<p class="note" id="{pid}-note">{esc(text)}</p>'


def mark_defaults(ax: Any, xy: tuple[list[float], list[float]], colour: str, label: str) -> None:
    """The defaults' (baseline's) point: a hollow diamond, drawn alike on the report and the
    comparison page."""
    ax.scatter(*xy, s=140, marker="D", facecolor="none", edgecolor=colour, lw=2, label=label, zorder=4)


def mark_best(ax: Any, xy: tuple[list[float], list[float]], colour: str, label: str) -> None:
    """The best's point: a star edged in black, above every other mark."""
    ax.scatter(*xy, s=260, marker="*", color=colour, edgecolor="black", lw=0.6, label=label, zorder=5)


def _cmap(x: float) -> Any:
    from matplotlib import colormaps

    return colormaps["viridis"](0.15 + 0.75 * x)


# ---- plots -------------------------------------------------------------------------------------
def plot_improvement(rows: list[dict], best: TrialOutcome, base: TrialOutcome, basis: str = "") -> str:
    """The best's change over the defaults per metric, on the figures the table shows (`basis`
    says which: the verdict's fresh runs, each bar with its 95% interval, or search measurements)."""
    rows = [r for r in rows if num(r.get("change_pct"))]
    if not rows:
        return note("plot-improvement", "No baseline measurement to compare the best trial with.")
    fig = _figure(7.5, 0.45 * len(rows) + 1.0)
    ax = fig.add_subplot()
    gains = [abs(r["change_pct"]) if r["better"] else -abs(r["change_pct"]) for r in rows]
    ypos = range(len(rows))[::-1]
    ax.barh(list(ypos), gains, color=[GREEN if g >= 0 else RED for g in gains], height=0.6)
    ax.set_yticks(list(ypos), [r["label"] for r in rows])
    for y, g, r in zip(ypos, gains, rows):
        lo, hi = r.get("change_low_pct"), r.get("change_high_pct")
        ci = f" [{lo:+.1f}%, {hi:+.1f}%]" if num(lo) and num(hi) else ""
        if ci:  # the interval as an error bar, signed as the bar (right is better)
            sign = 1 if r["better"] == (r["change_pct"] >= 0) else -1
            ends = sorted((sign * lo, sign * hi))
            ax.errorbar([g], [y], xerr=[[g - ends[0]], [ends[1] - g]], fmt="none", ecolor="#333", capsize=3, lw=0.8)
        ax.annotate(
            f"{r['change_pct']:+.1f}%{ci}  ({fmt(r['baseline'], r['metric'])} → {fmt(r['best'], r['metric'])})",
            (g, y),
            xytext=(4 if g >= 0 else -4, 0),
            textcoords="offset points",
            va="center",
            ha="left" if g >= 0 else "right",
            fontsize=8,
        )
    ax.axvline(0, color="#333", lw=0.8)
    ends = [abs(r[k]) for r in rows for k in ("change_low_pct", "change_high_pct") if num(r.get(k))]
    lim = max([abs(g) for g in gains] + ends) or 1
    ax.set_xlim(-lim * 1.9 if min(gains) < 0 else -lim * 0.05, lim * 1.9)
    ax.set_xlabel("improvement over the baseline, % (right is better)")
    ax.set_title(
        f"best (trial {best.number}) vs the server's defaults (trial {base.number})" + (f", {basis}" if basis else ""),
        fontsize=9,
    )
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "plot-improvement", "How much the best config beats the server's defaults, per metric.")


def _pareto_xy(axes: tuple[Objective, ...]) -> tuple[Objective, Objective]:
    """The two axes to draw: a minimized objective across, a maximized one up, when there is one
    of each (the usual "up and to the left is better")."""
    x, y = axes[0], axes[1]
    return (y, x) if x.maximize and not y.maximize else (x, y)


def _relation(t: Target, o: Objective) -> str:
    """'same' when target and axis read the same metric, 'related' for another statistic of it."""
    if t.key == o.key:
        return "same"
    return "related" if o.key.endswith(f"_{t.metric}_ms") else ""


def plot_pareto(info: dict, study_targets: Sequence[Target]) -> str:
    x, y = _pareto_xy(info["pareto_axes"])
    val = lambda o, a: (o.metrics or {}).get(a.key)  # noqa: E731
    pts = [o for o in info["trials"] if o.measured and num(val(o, x)) and num(val(o, y))]
    if not pts:
        return note("plot-pareto", "No trial was measured yet: nothing to plot.")
    fig = _figure(9.0, 5.2)
    ax = fig.add_subplot()
    xy = lambda ts: ([val(o, x) for o in ts], [val(o, y) for o in ts])  # noqa: E731
    feas = [o for o in pts if o.feasible]
    infeas = [o for o in pts if not o.feasible and not o.stopped_early]
    stopped = [o for o in pts if o.stopped_early]  # a few requests' figures, not a full measurement
    if infeas:
        ax.scatter(*xy(infeas), s=36, color=GREY, marker="o", label="missed a target", zorder=2)
    if stopped:
        ax.scatter(
            *xy(stopped), s=40, marker="v", facecolor="none", edgecolor=RED, label="stopped early (a few requests)"
        )
    if feas:
        ax.scatter(*xy(feas), s=36, color=BLUE, label="feasible", zorder=3)
    drawn = {o.number for o in pts}
    front = sorted((o for o in info["pareto"] if o.number in drawn), key=lambda o: val(o, x))
    xs, ys = xy(pts)
    if front and not x.maximize and y.maximize:  # the staircase of what is attainable
        fx, fy = xy(front)
        ax.plot(
            [fx[0], *fx, max(xs) * 1.1],
            [min(ys) * 0.9, *fy, fy[-1]],
            drawstyle="steps-post",
            color=BLUE,
            lw=1.2,
            ls="--",
            alpha=0.8,
            label="Pareto front",
            zorder=2,
        )
    elif front:
        ax.plot(*xy(front), color=BLUE, lw=1.2, ls="--", alpha=0.8, label="Pareto front", zorder=2)
    for o in pts:
        ax.annotate(
            f"#{o.number}", (val(o, x), val(o, y)), xytext=(4, 4), textcoords="offset points", fontsize=7, color="#555"
        )
    base, best = info["baseline"], info["best"]
    if base is not None and base.number in drawn:
        mark_defaults(ax, xy([base]), ORANGE, f"baseline (#{base.number})")
    if best is not None and best.number in drawn:
        mark_best(ax, xy([best]), GREEN, f"best (#{best.number})")
    if min(xs) > 0 and max(xs) / min(xs) > 4:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    for tg in study_targets:
        if _relation(tg, x):
            same = _relation(tg, x) == "same"
            ax.axvline(tg.threshold, color=RED, ls="-" if same else ":", lw=1.4, label=f"SLO {tg.describe()}")
            if tg.upper and same:
                ax.axvspan(tg.threshold, max(max(xs) * 1.2, tg.threshold * 1.05), color=RED, alpha=0.05)
        elif _relation(tg, y):
            ax.axhline(
                tg.threshold,
                color=RED,
                ls="-" if _relation(tg, y) == "same" else ":",
                lw=1.4,
                label=f"SLO {tg.describe()}",
            )
    ax.set_xlabel(f"{AXES.get(x.name, objective_label(x))}  {'→' if x.maximize else '←'} better")
    ax.set_ylabel(f"{AXES.get(y.name, objective_label(y))}  {'↑' if y.maximize else '↓'} better")
    ax.grid(alpha=0.25)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    if info["pareto_is_trade_off"]:
        caption = (
            "Throughput against TTFT p95 for every measured trial: a trade-off view, not the "
            "study's objective. Up and to the left is better; the dashed line is the Pareto "
            "front of feasible trials on these two metrics."
        )
    else:
        names = ", ".join(o.name for o in info["pareto_axes"])
        caption = (
            f"The study's objectives ({names}) for every measured trial; the dashed line joins "
            f"the Pareto set, the trials no feasible trial beats on every objective at once."
        )
    return _svg(fig, "plot-pareto", caption)


def plot_importance(importance: dict | None, tuned: int) -> str:
    """Bars of the importance the tuner stored ({flag: value}), or why there is none."""
    if importance is None:
        return note(
            "plot-importance",
            "Parameter importance is not in this results.json (written by "
            "an older kvtune); it is recorded by the tuner as a study runs.",
        )
    if "skipped" in importance:
        return note("plot-importance", f"Parameter importance was not computed: {importance['skipped']}.")
    imp = {k: float(v) for k, v in importance.items() if num(v)}
    if not imp:
        return note("plot-importance", "Parameter importance is empty: no flag was varied.")
    names = sorted(imp, key=lambda k: imp[k])
    fig = _figure(7.5, 0.38 * len(names) + 1.0)
    ax = fig.add_subplot()
    ax.barh(names, [imp[n] for n in names], color=BLUE, height=0.6)
    for i, n in enumerate(names):
        ax.annotate(f"{imp[n]:.2f}", (imp[n], i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlabel("importance for the objective (sums to 1)")
    ax.set_xlim(0, max(imp.values()) * 1.15 or 1)
    ax.spines[["top", "right"]].set_visible(False)
    rough = " With this few trials, treat it as a rough hint." if tuned < 20 else ""
    return _svg(
        fig,
        "plot-importance",
        f"Which flags moved the objective, from Optuna's parameter importance over {tuned} measured trials.{rough}",
    )


def plot_slice(info: dict, label: str) -> str:
    ts = [o for o in info["trials"] if not o.baseline and o.duplicate_of is None]
    names = sorted({k for o in ts for k in o.candidate.flags})
    names = [n for n in names if len({repr(o.candidate.flags.get(n)) for o in ts}) > 1]
    if not names:
        return note("plot-slice", "No flag was varied yet: no slice plots.")
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig = _figure(3.4 * cols, 2.5 * rows + 0.3)
    ys = [y_value(o) for o in ts if y_value(o) is not None]
    base, best = info["baseline"], info["best"]
    nmax = max([o.number for o in ts] or [1])
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, i + 1)
        vals = [o.candidate.flags.get(name) for o in ts]
        present = [v for v in vals if v is not None]
        numeric = all(num(v) for v in present) and len(set(present)) > 8
        order = sorted(set(present), key=lambda v: (not num(v), v if num(v) else 0, repr(v)))
        cats = [repr(v) for v in order]
        pos = (lambda v: v) if numeric else (lambda v: cats.index(repr(v)))  # noqa: E731
        for o, v in zip(ts, vals):
            if v is None:
                continue
            y = y_value(o)
            if y is None:
                ax.scatter([pos(v)], [0.03], marker="x", color=GREY, s=28, transform=ax.get_xaxis_transform(), zorder=2)
            elif o.stopped_early:  # a few requests' figures, not a full measurement
                ax.scatter([pos(v)], [y], marker="v", facecolor="none", edgecolor=RED, s=30, zorder=2)
            elif o.feasible:
                ax.scatter([pos(v)], [y], color=_cmap(o.number / nmax), s=30, edgecolor="white", lw=0.5, zorder=3)
            else:
                ax.scatter([pos(v)], [y], color=GREY, s=30, zorder=2)
            if best is not None and o.number == best.number:
                ax.scatter([pos(v)], [y], marker="*", s=180, color=GREEN, edgecolor="black", lw=0.5, zorder=4)
        if numeric:
            if min(present) > 0 and max(present) / min(present) >= 8:
                ax.set_xscale("log", base=2)
        else:
            ax.set_xticks(range(len(cats)), [c.strip("'") for c in cats], fontsize=8)
            ax.set_xlim(-0.5, len(cats) - 0.5)
        if base is not None and y_value(base) is not None:
            ax.axhline(y_value(base), color=ORANGE, ls="--", lw=1)
        if ys:
            ax.set_ylim(bottom=min(0, min(ys)) if info["direction"] is Direction.MAXIMIZE else None)
        ax.set_title(f"--{name}", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.25)
        ax.spines[["top", "right"]].set_visible(False)
    fig.supylabel(label, fontsize=9)
    fig.tight_layout()
    return _svg(
        fig,
        "plot-slice",
        "The objective against each tuned flag (colour: trial order, "
        "grey: missed a target, hollow triangle: stopped early after a few requests, not a full "
        "measurement, x: no measurement, star: best, dashed: baseline).",
    )


def plot_history(info: dict, label: str) -> str:
    ts = info["trials"]
    if not ts:
        return note("plot-history", "No trials yet.")
    fig = _figure(8.5, 3.6)
    ax = fig.add_subplot()
    maximize = info["direction"] is Direction.MAXIMIZE
    for o in ts:
        y = y_value(o)
        if y is None:
            ax.scatter([o.number], [0.03], marker="x", color=RED, s=40, transform=ax.get_xaxis_transform(), zorder=3)
        elif o.duplicate_of is not None:
            ax.scatter([o.number], [y], facecolor="none", edgecolor=GREY, s=36, zorder=2)
        elif o.stopped_early:  # a few requests' figures: drawn apart from full measurements
            ax.scatter([o.number], [y], marker="v", facecolor="none", edgecolor=RED, s=40, zorder=2)
        else:
            ax.scatter([o.number], [y], color=BLUE if o.feasible else GREY, s=36, zorder=3)
    run, xs, ys = None, [], []
    for o in ts:
        y = y_value(o)
        if o.feasible and y is not None:
            run = y if run is None else (max(run, y) if maximize else min(run, y))
        if run is not None:
            xs.append(o.number)
            ys.append(run)
    if xs:
        ax.plot(xs, ys, drawstyle="steps-post", color=GREEN, lw=2, label="best feasible so far")
    base = info["baseline"]
    if base is not None and y_value(base) is not None:
        ax.axhline(y_value(base), color=ORANGE, ls="--", lw=1, label="baseline")
    from matplotlib.lines import Line2D

    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], marker="o", ls="", color=BLUE, label="feasible"),
        Line2D([], [], marker="o", ls="", color=GREY, label="missed a target"),
        Line2D([], [], marker="x", ls="", color=RED, label="failed (no measurement)"),
        Line2D([], [], marker="v", ls="", markerfacecolor="none", color=RED, label="stopped early (a few requests)"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_xlabel("trial")
    ax.set_ylabel(label)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.25)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "plot-history", "The objective of each trial in order, and the best feasible value found so far.")
