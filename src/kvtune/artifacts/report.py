"""The study report: one self-contained HTML file a user opens in any browser, offline.

People read a tuning result by looking at it: how much better the winner is than the server's
defaults, where every trial landed on throughput against TTFT p95 (with the Pareto front and the
SLO line), which flags mattered (Optuna's parameter importance and slice views), how the search
progressed, and why the failures failed. So the report is mostly plots, drawn with matplotlib's
SVG backend (through `Figure`, never pyplot, so no global backend state) and inlined with
their text as text; the CSS is inline, there is no script, and a Content-Security-Policy of
``default-src 'none'`` makes any accidental external reference fail loudly instead of phoning
home. Everything is read from results.json; the Optuna study is only needed for importance
and is rebuilt from results.json when not given.
"""

from __future__ import annotations

import html
import io
import math
import re
import shlex
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtune import __version__, hardware
from kvtune.artifacts import overview as ov
from kvtune.errors import KvtuneError, TargetError

if TYPE_CHECKING:
    import optuna

BLUE, GREY, GREEN, ORANGE, RED = "#2b6cb0", "#a0a0a0", "#1a7f37", "#d9730d", "#cf222e"
PLOTS = ("plot-improvement", "plot-pareto", "plot-importance", "plot-slice", "plot-history")
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:0;background:#f6f8fa}
main{max-width:1120px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.sub{color:#59636e}.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:12px;margin:16px 0}
.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:10px 14px}
.card b{display:block;font-size:20px}.card span{color:#59636e;font-size:12px}
table{border-collapse:collapse;background:#fff;width:100%;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}th{background:#eef1f4}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.better{color:#1a7f37;font-weight:600}.worse{color:#cf222e;font-weight:600}
tr.best td{background:#e6f4ea}tr.infeasible td{color:#6e7781}tr.dup td{color:#8c959f;font-style:italic}
figure.plot{background:#fff;border:1px solid #d0d7de;border-radius:8px;margin:12px 0;padding:8px}
figure.plot svg{width:100%;height:auto;display:block;margin:0 auto}figcaption{color:#59636e;font-size:12px;padding:4px 8px}
pre{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:10px;white-space:pre-wrap;word-break:break-all}
code{font-size:12px}.kv{white-space:nowrap}.note{background:#fff8c5;border:1px solid #d4a72c;border-radius:8px;padding:8px 12px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}dt{color:#59636e}dd{margin:0}
"""


# ---- small helpers -------------------------------------------------------------------------
def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fmt(v: Any, key: str = "") -> str:
    if not _num(v):
        return "–"
    if key.endswith("_ms"):
        return f"{v:,.0f} ms" if abs(v) >= 10 else f"{v:.1f} ms"
    if key == "error_rate":
        return f"{v * 100:.1f}%"
    return f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}"


def _objective_label(results: dict) -> str:
    name = (results.get("spec") or {}).get("objective") or "objective"
    units = {"output_throughput": "output tok/s", "request_throughput": "requests/s"}
    if name in units:
        return units[name]
    m = re.match(r"(ttft|tpot|itl|e2el)_(\w+)$", name)
    return f"{m.group(1).upper()} {m.group(2)} (ms)" if m else name


def _targets(results: dict) -> list:
    from kvtune.objectives.targets import parse_target
    out = []
    for text in (results.get("spec") or {}).get("targets") or []:
        try:
            out.append(parse_target(text))
        except TargetError:
            pass
    return out


def _flags(t: dict) -> dict:
    return dict((t.get("candidate") or {}).get("flags") or {})


def _svg(fig: Any, pid: str, caption: str) -> str:
    """The figure as inline SVG (text kept as text; ids salted per plot so they stay unique)."""
    import matplotlib
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": pid}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    # matplotlib numbers its ids per figure (figure_1, patch_1, ...): prefix them with the plot's
    # id so they stay unique in one document, and the references with them
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{pid}-{m.group(1)}"', svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{pid}-{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{pid}-{m.group(1)})", svg)
    m = re.match(r'<svg([^>]*?) width="([0-9.]+)pt" height="[^"]*"', svg)
    if m:  # drop the fixed size; keep the natural width as a maximum so text stays legible
        svg = (f'<svg{m.group(1)} role="img" aria-label="{_e(caption)}" '
               f'style="max-width:{float(m.group(2)) * 4 / 3:.0f}px"' + svg[m.end():])
    return f'<figure class="plot" id="{pid}">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _figure(w: float, h: float) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # matplotlib is a dependency; say so if it is missing
        raise KvtuneError("the HTML report needs matplotlib: pip install matplotlib") from e
    fig = Figure(figsize=(w, h), dpi=100)
    fig.set_facecolor("white")
    return fig


def _note(pid: str, text: str) -> str:
    return f'<p class="note" id="{pid}-note">{_e(text)}</p>'


# ---- plots -------------------------------------------------------------------------------------
def plot_improvement(rows: list[dict], best: dict, base: dict) -> str:
    rows = [r for r in rows if _num(r.get("change_pct"))]
    if not rows:
        return _note("plot-improvement", "No baseline measurement to compare the best trial with.")
    fig = _figure(7.5, 0.45 * len(rows) + 1.0)
    ax = fig.add_subplot()
    gains = [abs(r["change_pct"]) if r["better"] else -abs(r["change_pct"]) for r in rows]
    ypos = range(len(rows))[::-1]
    ax.barh(list(ypos), gains, color=[GREEN if g >= 0 else RED for g in gains], height=0.6)
    ax.set_yticks(list(ypos), [r["label"] for r in rows])
    for y, g, r in zip(ypos, gains, rows):
        ax.annotate(f"{r['change_pct']:+.1f}%  ({_fmt(r['baseline'], r['metric'])} → "
                    f"{_fmt(r['best'], r['metric'])})", (g, y),
                    xytext=(4 if g >= 0 else -4, 0), textcoords="offset points", va="center",
                    ha="left" if g >= 0 else "right", fontsize=8)
    ax.axvline(0, color="#333", lw=0.8)
    lim = max(abs(g) for g in gains) or 1
    ax.set_xlim(-lim * 1.9 if min(gains) < 0 else -lim * 0.05, lim * 1.9)
    ax.set_xlabel("improvement over the baseline, % (right is better)")
    ax.set_title(f"best (trial {best['number']}) vs baseline (trial {base['number']}, server defaults)", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "plot-improvement", "How much the best config beats the server's defaults, per metric.")


def plot_pareto(results: dict, info: dict) -> str:
    pts = [t for t in ov.trials(results) if ov.is_measured(t)
           and _num(t["metrics"].get(ov.TTFT)) and _num(t["metrics"].get(ov.THROUGHPUT))]
    if not pts:
        return _note("plot-pareto", "No trial was measured yet: nothing to plot.")
    fig = _figure(9.0, 5.2)
    ax = fig.add_subplot()
    xy = lambda ts: ([t["metrics"][ov.TTFT] for t in ts], [t["metrics"][ov.THROUGHPUT] for t in ts])  # noqa: E731
    feas = [t for t in pts if t.get("feasible")]
    infeas = [t for t in pts if not t.get("feasible")]
    if infeas:
        ax.scatter(*xy(infeas), s=36, color=GREY, marker="o", label="missed a target", zorder=2)
    if feas:
        ax.scatter(*xy(feas), s=36, color=BLUE, label="feasible", zorder=3)
    front = info["pareto"]
    xs, ys = xy(pts)
    if front:  # the staircase of what is attainable: up at each front point, flat to the right
        fx, fy = xy(front)
        ax.plot([fx[0], *fx, max(xs) * 1.1], [min(ys) * 0.9, *fy, fy[-1]], drawstyle="steps-post",
                color=BLUE, lw=1.2, ls="--", alpha=0.8, label="Pareto front", zorder=2)
    for t in pts:
        ax.annotate(f"#{t['number']}", (t["metrics"][ov.TTFT], t["metrics"][ov.THROUGHPUT]),
                    xytext=(4, 4), textcoords="offset points", fontsize=7, color="#555")
    base, best = info["baseline"], info["best"]
    if base and base in pts:
        ax.scatter(*xy([base]), s=140, marker="D", facecolor="none", edgecolor=ORANGE, lw=2,
                   label=f"baseline (#{base['number']})", zorder=4)
    if best and best in pts:
        ax.scatter(*xy([best]), s=260, marker="*", color=GREEN, edgecolor="black", lw=0.6,
                   label=f"best (#{best['number']})", zorder=5)
    if min(xs) > 0 and max(xs) / min(xs) > 4:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    for tg in _targets(results):
        if tg.metric == "ttft":
            ls = "-" if tg.stat == "p95" else ":"
            ax.axvline(tg.threshold, color=RED, ls=ls, lw=1.4, label=f"SLO {tg.describe()}")
            if tg.upper and tg.stat == "p95":
                ax.axvspan(tg.threshold, max(max(xs) * 1.2, tg.threshold * 1.05), color=RED, alpha=0.05)
        elif tg.metric == "output_throughput":
            ax.axhline(tg.threshold, color=RED, ls="-", lw=1.4, label=f"SLO {tg.describe()}")
    ax.set_xlabel("TTFT p95 (ms)  ← better")
    ax.set_ylabel("output throughput (tok/s)  ↑ better")
    ax.grid(alpha=0.25)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "plot-pareto", "Throughput against TTFT p95 for every measured trial. Up and to "
                "the left is better; the dashed line is the Pareto front of feasible trials.")


def _importance_study(results: dict, study: "optuna.Study | None") -> "optuna.Study":
    """An in-memory study of the COMPLETE trials that have params, duplicates left out;
    rebuilt from results.json (categorical distributions) when no study is given."""
    import optuna
    from optuna.distributions import CategoricalDistribution
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        direction = results.get("direction", "maximize")
        out = optuna.create_study(direction=direction)
        if study is not None:
            keep = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                    if t.params and (t.user_attrs.get("outcome") or {}).get("duplicate_of") is None]
            out.add_trials(keep)
            return out
        ts = [t for t in ov.trials(results) if _flags(t) and not t.get("baseline")
              and t.get("duplicate_of") is None]
        choices: dict[str, list] = {}
        for t in ts:
            for k, v in _flags(t).items():
                if v not in choices.setdefault(k, []):
                    choices[k].append(v)
        worst = 0.0 if direction == "maximize" else 1e12
        for t in ts:
            value = t.get("objective")
            if not _num(value) or (not t.get("feasible") and not t.get("metrics")):
                value = worst
            flags = _flags(t)
            out.add_trial(optuna.trial.create_trial(
                params=flags, value=float(value),
                distributions={k: CategoricalDistribution(choices[k]) for k in flags}))
        return out
    finally:
        optuna.logging.set_verbosity(verbosity)


def plot_importance(results: dict, study: "optuna.Study | None") -> str:
    import optuna
    s = _importance_study(results, study)
    trials = s.get_trials(deepcopy=False)
    varying = {k for k in {k for t in trials for k in t.params}
               if len({repr(t.params.get(k)) for t in trials if k in t.params}) > 1}
    if len(trials) < 2 or not varying:
        return _note("plot-importance", f"Parameter importance needs at least 2 tuned trials with "
                     f"varying flags; this study has {len(trials)}.")
    if len({t.value for t in trials}) < 2:
        return _note("plot-importance", "Parameter importance needs trials whose objective "
                     "differs; every tuned trial scored the same so far.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imp = optuna.importance.get_param_importances(s)
    except (ValueError, RuntimeError) as e:
        return _note("plot-importance", f"Parameter importance could not be computed: {e}")
    names = list(imp)[::-1]
    fig = _figure(7.5, 0.38 * len(names) + 1.0)
    ax = fig.add_subplot()
    ax.barh(names, [imp[n] for n in names], color=BLUE, height=0.6)
    for i, n in enumerate(names):
        ax.annotate(f"{imp[n]:.2f}", (imp[n], i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_xlabel("importance for the objective (PED-ANOVA, sums to 1)")
    ax.set_xlim(0, max(imp.values() or [1]) * 1.15 or 1)
    ax.spines[["top", "right"]].set_visible(False)
    rough = " With this few trials, treat it as a rough hint." if len(trials) < 20 else ""
    return _svg(fig, "plot-importance", f"Which flags moved the objective, from Optuna's parameter "
                f"importance over {len(trials)} tuned trials.{rough}")


def _y(t: dict) -> float | None:
    v = t.get("objective")
    return float(v) if _num(v) and t.get("metrics") else None


def plot_slice(results: dict, info: dict) -> str:
    ts = [t for t in ov.trials(results) if not t.get("baseline") and t.get("duplicate_of") is None]
    names = sorted({k for t in ts for k in _flags(t)})
    names = [n for n in names if len({repr(_flags(t).get(n)) for t in ts}) > 1]
    if not names:
        return _note("plot-slice", "No flag was varied yet: no slice plots.")
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig = _figure(3.4 * cols, 2.5 * rows + 0.3)
    ys = [_y(t) for t in ts if _y(t) is not None]
    base = info["baseline"]
    best = info["best"]
    nmax = max([t["number"] for t in ts] or [1])
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, i + 1)
        vals = [_flags(t).get(name) for t in ts]
        present = [v for v in vals if v is not None]
        numeric = all(_num(v) for v in present) and len(set(present)) > 8
        order = sorted(set(present), key=lambda v: (not _num(v), v if _num(v) else 0, repr(v)))
        cats = [repr(v) for v in order]
        pos = (lambda v: v) if numeric else (lambda v: cats.index(repr(v)))  # noqa: E731
        for t, v in zip(ts, vals):
            if v is None:
                continue
            y = _y(t)
            if y is None:
                ax.scatter([pos(v)], [0.03], marker="x", color=GREY, s=28,
                           transform=ax.get_xaxis_transform(), zorder=2)
            elif t.get("feasible"):
                ax.scatter([pos(v)], [y], color=_cmap(t["number"] / nmax), s=30, edgecolor="white",
                           lw=0.5, zorder=3)
            else:
                ax.scatter([pos(v)], [y], color=GREY, s=30, zorder=2)
            if best is not None and t is best:
                ax.scatter([pos(v)], [y], marker="*", s=180, color=GREEN, edgecolor="black", lw=0.5, zorder=4)
        if numeric:
            if min(present) > 0 and max(present) / min(present) >= 8:
                ax.set_xscale("log", base=2)
        else:
            ax.set_xticks(range(len(cats)), [c.strip("'") for c in cats], fontsize=8)
            ax.set_xlim(-0.5, len(cats) - 0.5)
        if base is not None and _y(base) is not None:
            ax.axhline(_y(base), color=ORANGE, ls="--", lw=1)
        if ys:
            ax.set_ylim(bottom=min(0, min(ys)) if info["direction"] == "maximize" else None)
        ax.set_title(f"--{name}", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.25)
        ax.spines[["top", "right"]].set_visible(False)
    fig.supylabel(_objective_label(results), fontsize=9)
    fig.tight_layout()
    return _svg(fig, "plot-slice", "The objective against each tuned flag (colour: trial order, "
                "grey: missed a target, x: no measurement, star: best, dashed: baseline).")


def _cmap(x: float) -> Any:
    from matplotlib import colormaps
    return colormaps["viridis"](0.15 + 0.75 * x)


def plot_history(results: dict, info: dict) -> str:
    ts = ov.trials(results)
    if not ts:
        return _note("plot-history", "No trials yet.")
    fig = _figure(8.5, 3.6)
    ax = fig.add_subplot()
    maximize = info["direction"] != "minimize"
    for t in ts:
        y = _y(t)
        n = t["number"]
        if y is None:
            ax.scatter([n], [0.03], marker="x", color=RED, s=40, transform=ax.get_xaxis_transform(), zorder=3)
        elif t.get("duplicate_of") is not None:
            ax.scatter([n], [y], facecolor="none", edgecolor=GREY, s=36, zorder=2)
        else:
            ax.scatter([n], [y], color=BLUE if t.get("feasible") else GREY, s=36, zorder=3)
    run, xs, ys = None, [], []
    for t in ts:
        y = _y(t)
        if t.get("feasible") and y is not None:
            run = y if run is None else (max(run, y) if maximize else min(run, y))
        if run is not None:
            xs.append(t["number"])
            ys.append(run)
    if xs:
        ax.plot(xs, ys, drawstyle="steps-post", color=GREEN, lw=2, label="best feasible so far")
    base = info["baseline"]
    if base is not None and _y(base) is not None:
        ax.axhline(_y(base), color=ORANGE, ls="--", lw=1, label="baseline")
    from matplotlib.lines import Line2D
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], marker="o", ls="", color=BLUE, label="feasible"),
                Line2D([], [], marker="o", ls="", color=GREY, label="missed a target"),
                Line2D([], [], marker="x", ls="", color=RED, label="failed (no measurement)")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_xlabel("trial")
    ax.set_ylabel(_objective_label(results))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.25)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "plot-history", "The objective of each trial in order, and the best feasible "
                "value found so far.")


# ---- tables and text ---------------------------------------------------------------------------
def _header(results: dict, info: dict) -> str:
    c, best, base = info["counts"], info["best"], info["baseline"]
    hw = info["hardware"]
    w = (results.get("spec") or {}).get("workload") or {}
    cards = [("best trial", f"#{best['number']}" if best else "none yet"),
             (_objective_label(results) + ", best", _fmt(best.get("objective")) if best else "–"),
             (f"trials: {c['feasible']} feasible, {c['infeasible']} not"
              + (f", {c['duplicates']} repeats" if c["duplicates"] else ""), str(c["trials"]))]
    if best and base and _num(best.get("objective")) and _num(base.get("objective")) and base["objective"]:
        cards.append((_objective_label(results) + " vs baseline",
                      f"{(best['objective'] / base['objective'] - 1) * 100:+.0f}%"))
    try:
        machine = hardware.describe(hw) + (f", {hw['os']}" if hw.get("os") else "")
    except KeyError:
        machine = ", ".join(f"{k} {v}" for k, v in hw.items() if k != "host")
    items = [("hardware", machine),
             ("backend", info["backend_version"]),
             ("workload", f"{w.get('concurrency')} concurrent users, ~{w.get('prompt_tokens')} prompt "
                          f"tokens, {w.get('output_tokens')} output tokens, {w.get('num_requests')} "
                          f"requests (+{w.get('warmup_requests')} warm-up)"),
             ("targets", ", ".join(info["targets"]) or "none"),
             ("objective", f"{_objective_label(results)} ({info['direction']})")]
    return (f"<header id='summary'><h1>kvtune report: {_e(info['study'])}</h1>"
            f"<div class='sub'>{_e(info['backend_version'])}</div><div class='cards'>"
            + "".join(f"<div class='card'><b>{_e(v)}</b><span>{_e(k)}</span></div>" for k, v in cards)
            + "</div><dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items)
            + "</dl></header>")


def _comparison_table(info: dict) -> str:
    rows = info["best_vs_baseline"]
    if not rows:
        return "<p class='note'>No best-versus-baseline comparison yet.</p>"
    body = "".join(
        f"<tr><td>{_e(r['label'])}</td><td class='num'>{_fmt(r['baseline'], r['metric'])}</td>"
        f"<td class='num'>{_fmt(r['best'], r['metric'])}</td><td class='num {'better' if r['better'] else 'worse'}'>"
        f"{r['change_pct']:+.1f}%</td></tr>" for r in rows)
    return ("<table id='best-vs-baseline'><tr><th>metric</th><th>baseline</th><th>best</th>"
            f"<th>change</th></tr>{body}</table>")


def _status(t: dict) -> str:
    if t.get("duplicate_of") is not None:
        return f"same config as #{t['duplicate_of']} (not re-run)"
    return "feasible" if t.get("feasible") else (t.get("reason") or "infeasible")


def _trials_table(results: dict, info: dict) -> str:
    cols = (("output_throughput", "out tok/s"), ("p95_ttft_ms", "TTFT p95"), ("p95_tpot_ms", "TPOT p95"),
            ("p95_e2el_ms", "E2EL p95"), ("error_rate", "errors"))
    best = info["best"]["number"] if info["best"] else None
    out = ["<table id='trials-table'><tr><th>#</th><th>flags</th>"
           + "".join(f"<th>{_e(h)}</th>" for _, h in cols) + "<th>status</th></tr>"]
    for t in ov.trials(results):
        cls = ("best" if t["number"] == best else "dup" if t.get("duplicate_of") is not None
               else "" if t.get("feasible") else "infeasible")
        flags = " ".join(f"<span class='kv'>{_e(k)}={_e(v)}</span>" for k, v in _flags(t).items())
        m = t.get("metrics") or {}
        out.append(f"<tr class='{cls}'><td>{t['number']}</td><td><code>{flags or '(server defaults)'}</code></td>"
                   + "".join(f"<td class='num'>{_fmt(m.get(k), k)}</td>" for k, _ in cols)
                   + f"<td>{_e(_status(t))}</td></tr>")
    return "".join(out) + "</table>"


def _failures_table(info: dict) -> str:
    if not info["failures"]:
        return "<p id='failures-none'>No failures: every trial met the targets.</p>"
    rows = "".join(f"<tr><td>{_e(g['category'])}</td><td class='num'>{g['count']}</td>"
                   f"<td>{_e(', '.join(f'#{n}' for n in g['trials']))}</td><td>{_e(g['example'])}</td></tr>"
                   for g in info["failures"])
    return ("<table id='failures-table'><tr><th>reason</th><th>trials</th><th>which</th>"
            f"<th>example</th></tr>{rows}</table>")


def _command(results: dict, info: dict) -> str:
    best = info["best"]
    if not best:
        return "<p class='note'>No feasible config yet.</p>"
    argv = results.get("best_argv") or best.get("argv") or []
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((best.get("env") or {}).items()))
    return f"<pre id='best-command'>{_e((env + ' ' if env else '') + shlex.join(argv))}</pre>"


def render_report(results: dict, study: "optuna.Study | None" = None) -> str:
    """The whole report as one HTML string (no network needed, no script)."""
    info = ov.overview(results)
    best, base = info["best"], info["baseline"]
    sections = [
        _header(results, info),
        "<section id='best'><h2>Best config against the baseline</h2>",
        plot_improvement(info["best_vs_baseline"], best, base) if best and base else
        _note("plot-improvement", "No best-versus-baseline comparison yet."),
        _comparison_table(info), "<h3>Best command line</h3>", _command(results, info), "</section>",
        "<section id='tradeoff'><h2>Throughput against TTFT p95</h2>", plot_pareto(results, info),
        "</section><section id='flags'><h2>How each flag relates to the objective</h2>",
        plot_importance(results, study), plot_slice(results, info),
        "</section><section id='history'><h2>Trial history</h2>", plot_history(results, info),
        "</section><section id='failures'><h2>Failures by reason</h2>", _failures_table(info),
        "</section><section id='trials'><h2>All trials</h2>", _trials_table(results, info), "</section>",
    ]
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
            "<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>kvtune report: {_e(info['study'])}</title><style>{CSS}</style></head><body><main>"
            + "\n".join(sections)
            + f"<footer class='sub'><p>Generated by kvtune {_e(__version__)} from results.json.</p></footer>"
            "</main></body></html>\n")


def write_report(path: Path, results: dict, study: "optuna.Study | None" = None) -> Path:
    path = Path(path)
    path.write_text(render_report(results, study), encoding="utf-8")
    return path
