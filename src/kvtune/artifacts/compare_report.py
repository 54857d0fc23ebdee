"""The comparison page: studies (typically one per backend) side by side, one self-contained HTML
file like the study report (`artifacts/report.py`: inline CSS and SVG, no script, a CSP that
forbids any external reference).

Which backend to run is read off a picture: every measured trial of every study on output
throughput against TTFT p95, one colour per study, each study's best and defaults marked; beside
it the same table `kvtune compare` prints, each best's figure on fresh servers with its interval,
and the best overall as the verdict's test decided it (artifacts/side_by_side.py), or none. Kept apart from plots.py, which holds the one-study
plots, and drawn with its helpers so the two pages look alike.
"""

from __future__ import annotations

from pathlib import Path

from kvtune import __version__
from kvtune.artifacts.plots import (
    BLUE,
    GREEN,
    ORANGE,
    RED,
    _figure,
    _svg,
    esc,
    fmt,
    mark_best,
    mark_defaults,
    note,
    num,
)
from kvtune.artifacts.report import CSS
from kvtune.artifacts.side_by_side import FIGURES, Comparison

PLOT_ID = "plot-backends"
# One colour per study (after these, matplotlib's tab10).
COLOURS = (BLUE, ORANGE, GREEN, RED, "#8250df", "#0a7d8c")
X, Y = "p95_ttft_ms", "output_throughput"


def _colour(i: int) -> str:
    if i < len(COLOURS):
        return COLOURS[i]
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    return to_hex(colormaps["tab10"](i % 10))


def plot_backends(c: Comparison) -> str:
    """Output throughput against TTFT p95 for every measured trial, one colour per study."""
    drawn = [
        (
            i,
            s,
            [o for o in s.outcomes if o.measured and num((o.metrics or {}).get(X)) and num((o.metrics or {}).get(Y))],
        )
        for i, s in enumerate(c.sides)
    ]
    if not any(pts for _, _, pts in drawn):
        return note(PLOT_ID, "No trial was measured yet: nothing to plot.")
    fig = _figure(9.0, 5.2)
    ax = fig.add_subplot()
    for i, s, pts in drawn:
        colour = _colour(i)
        feas = [o for o in pts if o.feasible]
        miss = [o for o in pts if not o.feasible]
        xy = lambda ts: ([o.metrics[X] for o in ts], [o.metrics[Y] for o in ts])  # noqa: E731
        if feas:
            ax.scatter(*xy(feas), s=36, color=colour, label=f"{s.label}: feasible", zorder=3)
        if miss:
            ax.scatter(
                *xy(miss),
                s=36,
                facecolor="none",
                edgecolor=colour,
                lw=1.2,
                label=f"{s.label}: missed a target",
                zorder=2,
            )
        if s.baseline is not None and any(o is s.baseline for o in pts):
            mark_defaults(ax, xy([s.baseline]), colour, f"{s.label}: defaults (#{s.baseline.number})")
        if s.best is not None and any(o is s.best for o in pts):
            mark_best(ax, xy([s.best]), colour, f"{s.label}: best (#{s.best.number})")
    ax.set_xlabel("TTFT p95 (ms)  ← better")
    ax.set_ylabel("output throughput (tok/s)  ↑ better")
    ax.grid(alpha=0.25)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    caption = (
        "Output throughput against TTFT p95 for every measured trial, one colour per study: "
        "filled = met every target, hollow = missed one; the star is each study's best, "
        "the diamond its defaults. Up and to the left is better."
    )
    return _svg(fig, PLOT_ID, caption)


def _table(c: Comparison) -> str:
    head = (
        "<tr><th>study</th><th>config</th>"
        + "".join(f"<th>{esc(h)}</th>" for _, h in FIGURES)
        + "<th>measured</th><th>feasible</th><th>trials</th><th>search time (s)</th></tr>"
    )
    body = []
    for r in c.rows():
        if r["trial"] is None:
            config = "no feasible config" if r["role"] == "best" else "defaults: not measured"
        else:
            config = f"{r['role']}: trial {r['trial']}" + (
                " (the defaults)" if r["role"] == "best" and r["is_defaults"] else ""
            )
        body.append(
            f"<tr class='{'best' if r['winner'] else ''}'><td>{esc(r['label'])}</td><td>{esc(config)}</td>"
            + "".join(f"<td class='num'>{fmt(r[k], k)}</td>" for k, _ in FIGURES)
            + f"<td>{esc(r.get('basis') or '-')}</td>"
            + f"<td>{'yes' if r['feasible'] else 'no'}</td><td class='num'>{r['trials']}</td>"
            f"<td class='num'>{fmt(r['wall_s'])}</td></tr>"
        )
    return f"<table id='side-by-side'>{head}{''.join(body)}</table>"


def render_compare_report(c: Comparison) -> str:
    title = c.name or " vs ".join(s.study for s in c.sides)
    w = c.winner
    won = w.best if w is not None else None  # a winner has a best
    verdict = (
        f"<p id='best-overall'><b>Best overall: {esc(w.label)}</b>, trial {won.number} of "
        f"study {esc(w.study)}. Why: {esc(c.why)}.</p>"
        if w is not None and won is not None
        else f"<p class='note' id='best-overall'>No best overall: {esc(c.why)}.</p>"
    )
    fresh = "".join(f"<li>{esc(s.figure_text())}</li>" for s in c.sides)
    verdict += f"<p class='sub'>{esc(c.objective.name)} on fresh servers (95% interval):</p><ul id='fresh'>{fresh}</ul>"
    skipped = "".join(f"<li>{esc(s['backend'])}: not tuned: {esc(s['reason'])}</li>" for s in c.skipped)
    studies = "".join(f"<li>{esc(s.study)}: {esc(s.version)}</li>" for s in c.sides)
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>kvtune comparison: {esc(title)}</title><style>{CSS}</style></head><body><main>"
        f"<header><h1>kvtune comparison: {esc(title)}</h1><div class='sub'>objective "
        f"{esc(c.objective.name)} ({esc(c.objective.direction)}), the same workload and targets</div></header>"
        f"<section id='verdict'><h2>Which one?</h2>{verdict}{_table(c)}"
        + (f"<ul id='skipped'>{skipped}</ul>" if skipped else "")
        + f"</section><section id='tradeoff'><h2>Throughput against TTFT p95</h2>{plot_backends(c)}</section>"
        f"<section id='studies'><h2>Studies</h2><ul>{studies}</ul><p class='sub'>Each study's own "
        "report: <code>kvtune report STUDY</code>.</p></section>"
        f"<footer class='sub'><p>Generated by kvtune {esc(__version__)} from results.json.</p></footer>"
        "</main></body></html>\n"
    )


def write_compare_report(path: Path, c: Comparison) -> Path:
    path = Path(path)
    path.write_text(render_compare_report(c), encoding="utf-8")
    return path
