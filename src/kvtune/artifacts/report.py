"""The study report: one self-contained HTML file a user opens in any browser, offline.

People read a tuning result by looking at it: how much better the winner is than the server's
defaults, where every trial landed on the study's objectives (or, for one objective, on
throughput against TTFT p95 as a trade-off view), which flags mattered (the parameter importance
the tuner stored), how the search progressed, and why the failures failed. This module lays out
the page and its tables; the plots are drawn in `plots.py`. The CSS is inline, there is no
script, and a Content-Security-Policy of ``default-src 'none'`` makes any accidental external
reference fail loudly instead of phoning home. Everything is read from results.json, through the
same overview `kvtune show` prints.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from kvtune import __version__, hardware
from kvtune.artifacts import cost_energy
from kvtune.artifacts import overview as ov
from kvtune.artifacts.fidelity_plot import fidelity_section
from kvtune.artifacts.plots import (
    PLOTS,
    esc,
    fmt,
    num,
    objective_label,
    plot_history,
    plot_importance,
    plot_improvement,
    plot_pareto,
    plot_slice,
)
from kvtune.artifacts.time_section import time_section
from kvtune.study import unconfirmed
from kvtune.study.best_figures import BestFigures
from kvtune.study.capacity_text import capacity_unit, outcome_sentence
from kvtune.study.disturbed import disturbed_measurements
from kvtune.study.naming import Figure
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.study.what_would_work import WhatWouldWork
from kvtune.verdict import Verdict
from kvtune.verdict.text import summary_lines

__all__ = ["PLOTS", "render_report", "write_report"]

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


def _header(info: dict) -> str:
    c, best = info["counts"], info["best"]
    hw, w = info["hardware"], info["workload"]
    label = objective_label(info["objectives"][0])
    if info["objectives"][0].name == "capacity":
        label = f"capacity ({capacity_unit(w)})"  # users, req/s or x recorded rate (a trace)
    fig = info["best_figure"]
    counted = (
        f"trials: {c['feasible']} feasible, {c['infeasible']} not"
        + (f" ({c['not_held']} failed the re-measurement)" if c.get("not_held") else "")
        + (f", {c['duplicates']} repeats" if c["duplicates"] else "")
    )
    figures = info["choice"].figures
    cards = [
        ("best trial", f"#{best.number}" if best else _no_best(info)),
        _best_card(label, fig, figures),
        (counted, str(c["trials"])),
    ]
    change = info["objective_change"]
    obj_row = figures.objective_row if figures is not None and figures.fresh else None
    if obj_row is not None and obj_row.change is not None:
        cards.append((f"{label} vs the defaults ({figures.label()})", obj_row.change.text()))
    elif change and not (figures is not None and figures.fresh):
        cards.append(
            (
                f"{label} vs baseline ({change['basis']}; +/- from {change['noise']})",
                f"{change['change_pct']:+.0f}% +/- {change['change_pm_pct']:.0f}",
            )
        )
    try:
        machine = hardware.describe(hw) + (f", {hw['os']}" if hw.get("os") else "")
    except KeyError:
        machine = ", ".join(f"{k} {v}" for k, v in hw.items() if k != "host")
    items = [
        ("hardware", machine),
        *(("GPUs", line) for line in hardware.gpu_lines(hw)),
        ("backend", info["backend_version"]),
        (
            "workload",
            f"{w.describe()}; {w.num_requests} requests (+{w.warmup_requests} warm-up)",
        ),
        ("targets", ", ".join(info["targets"]) or "none"),
        ("objective", ", ".join(f"{objective_label(o)} ({o.direction})" for o in info["objectives"])),
    ]
    held = outcome_sentence(best.confirmation, best.metrics) if best else None
    if held:
        items.append(("capacity on the trace", held))
    return (
        f"<header id='summary'><h1>kvtune report: {esc(info['study'])}</h1>"
        f"<div class='sub'>{esc(info['backend_version'])}</div><div class='cards'>"
        + "".join(f"<div class='card'><b>{esc(v)}</b><span>{esc(k)}</span></div>" for k, v in cards)
        + "</div><dl>"
        + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
        + "</dl></header>"
    )


def _best_card(label: str, fig: Figure | None, figures: BestFigures | None) -> tuple[str, str]:
    """The best's headline card: the verdict's fresh figure with its 95% interval when there is
    one (study/best_figures.py), else the search figure with the study's noise, labelled."""
    row = figures.objective_row if figures is not None and figures.fresh else None
    if figures is not None and row is not None:
        return f"{label}, best: {figures.label()}", row.best.text()
    if fig is None:
        return label + ", best", "–"
    return f"{label}, best: {fig.label}; +/- from {fig.noise.source()}", f"{fmt(fig.mean)} +/- {fmt(fig.half_width)}"


def _no_best(info: dict) -> str:
    """What a study with no best ended with: the verdict's decision, else none yet."""
    verdict = info["choice"].naming.verdict
    return f"none: {verdict.kind.value}" if verdict is not None else "none yet"


def _comparison_table(info: dict) -> str:
    rows = info["best_vs_baseline"]
    best, base = info["best"], info["baseline"]
    if best is not None and base is not None and best.number == base.number:
        return (
            "<p class='note' id='defaults-best'>The server's defaults are the best: nothing to compare them with.</p>"
        )
    if not rows:
        return "<p class='note'>No best-versus-baseline comparison yet.</p>"
    body = "".join(
        f"<tr><td>{esc(r['label'])}</td><td class='num'>{fmt(r['baseline'], r['metric'])}</td>"
        f"<td class='num'>{fmt(r['best'], r['metric'])}</td><td class='num {_change_class(r)}'>"
        f"{esc(_change(r))}</td></tr>"
        for r in rows
    )
    sources = sorted({r["noise"] for r in rows if r.get("noise")})
    fresh = any("change_low_pct" in r for r in rows)
    return (
        f"<p id='comparison-basis'>{esc(info.get('best_vs_baseline_evidence') or '')}"
        + ("; [..] is the change's 95% interval from the verdict's fresh runs" if fresh else "")
        + (f"; +/- is 95% from this study's noise ({esc('; '.join(sources))})" if sources and not fresh else "")
        + ".</p><table id='best-vs-baseline'><tr><th>metric</th><th>baseline</th><th>best</th>"
        f"<th>change</th></tr>{body}</table>"
    )


def _change(r: dict) -> str:
    """``+29.8% [+11.4%, +51.3%]`` (fresh runs) or ``+29.6% +/- 27.7`` (search, the study's noise)."""
    lo, hi, pm = r.get("change_low_pct"), r.get("change_high_pct"), r.get("change_pm_pct")
    if num(lo) and num(hi):
        return f"{r['change_pct']:+.1f}% [{lo:+.1f}%, {hi:+.1f}%]"
    return f"{r['change_pct']:+.1f}%" + (f" +/- {pm:.1f}" if num(pm) else "")


def _change_class(r: dict) -> str:
    return "" if r.get("within_noise") else "better" if r["better"] else "worse"


def _cost_energy(results: dict, info: dict) -> str:
    """Cost per 1M tokens (with a price) and energy per token of the best and the baseline."""
    best, base = info["best"], info["baseline"]
    price = cost_energy.price_text(results.get("spec") or {})
    sides = [(label, o.metrics or {}) for label, o in (("best", best), ("baseline", base)) if o]
    rows = [(key, label) for key, label in cost_energy.ROWS if any(m.get(key) is not None for _, m in sides)]
    head = "".join(f"<li>{esc(line)}</li>" for line in cost_energy.lines(best, base, results.get("spec") or {}))
    table = (
        ""
        if not rows
        else (
            "<table id='cost-energy-table'><tr><th>figure</th>"
            + "".join(f"<th>{esc(label)} (#{o.number})</th>" for label, o in (("best", best), ("baseline", base)) if o)
            + "</tr>"
            + "".join(
                f"<tr><td>{esc(label)}</td>"
                + "".join(f"<td class='num'>{esc(_small(m.get(key)))}</td>" for _, m in sides)
                + "</tr>"
                for key, label in rows
            )
            + "</table>"
        )
    )
    return (
        "<section id='cost-energy'><h2>Cost and energy</h2>"
        + (f"<p>Price: {esc(price)}.</p>" if price else "")
        + f"<ul>{head}</ul>{table}</section>"
    )


def _small(v: object) -> str:
    """Four significant figures: costs and joules per token are small numbers."""
    return f"{v:.4g}" if num(v) else "–"


def _status(o: TrialOutcome) -> str:
    if o.duplicate_of is not None:
        return f"same config as #{o.duplicate_of} (not re-run)"
    if o.feasible and not o.held:
        return f"{ov.NOT_HELD}: {(o.confirmation or {}).get('reason') or 'it no longer met the targets'}"
    return "feasible" if o.feasible else (o.reason or "infeasible")


def _trials_table(info: dict) -> str:
    cols = (
        ("output_throughput", "out tok/s"),
        ("p95_ttft_ms", "TTFT p95"),
        ("p95_tpot_ms", "TPOT p95"),
        ("p95_e2el_ms", "E2EL p95"),
        ("error_rate", "errors"),
    )
    best = info["best"].number if info["best"] else None
    out = [
        "<p class='sub'>Each trial's search measurement (one run; the best's is selected: biased up); "
        "the best's figures are above.</p>"
        "<table id='trials-table'><tr><th>#</th><th>flags</th>"
        + "".join(f"<th>{esc(h)}</th>" for _, h in cols)
        + "<th>evidence</th><th>status</th></tr>"
    ]
    for o in info["trials"]:
        cls = (
            "best"
            if o.number == best
            else "dup"
            if o.duplicate_of is not None
            else ""
            if o.feasible and o.held
            else "infeasible"
        )
        flags = " ".join(f"<span class='kv'>{esc(k)}={esc(v)}</span>" for k, v in o.candidate.flags.items())
        m = o.metrics or {}
        out.append(
            f"<tr class='{cls}'><td>{o.number}</td><td><code>{flags or 'the server&#39;s defaults'}</code></td>"
            + "".join(f"<td class='num'>{fmt(m.get(k), k)}</td>" for k, _ in cols)
            + f"<td>{esc(o.evidence if o.measured else '')}</td><td>{esc(_status(o))}</td></tr>"
        )
    return "".join(out) + "</table>"


def _failures_table(info: dict) -> str:
    if not info["failures"]:
        return "<p id='failures-none'>No failures: every trial met the targets.</p>"
    rows = "".join(
        f"<tr><td>{esc(g['category'])}</td><td class='num'>{g['count']}</td>"
        f"<td>{esc(', '.join(f'#{n}' for n in g['trials']))}</td><td>{esc(g['example'])}</td></tr>"
        for g in info["failures"]
    )
    return (
        "<table id='failures-table'><tr><th>reason</th><th>trials</th><th>which</th>"
        f"<th>example</th></tr>{rows}</table>"
    )


def _disturbed_table(info: dict) -> str:
    """The measurements taken while the machine was busy with something else (study/disturbed.py)."""
    listed = disturbed_measurements(info["trials"])
    if not listed:
        return ""
    rows = "".join(
        f"<tr><td>#{d.trial}</td><td>{esc(d.measurement)}</td><td class='num'>"
        f"{'-' if d.foreign_cores is None else f'{d.foreign_cores:.2f}'}</td><td>{esc(d.why)}</td>"
        f"<td class='num'>{d.remeasured}</td><td>{'still disturbed: no evidence' if d.still_disturbed else 'quiet'}"
        "</td></tr>"
        for d in listed
    )
    return (
        "<section id='disturbed'><h2>Disturbed measurements</h2><p class='note'>The machine was busy with "
        "something else while these ran; a disturbed measurement is measured again, and one that stays "
        "disturbed is no evidence for naming the best.</p><table id='disturbed-table'><tr><th>trial</th>"
        "<th>measurement</th><th>foreign cores</th><th>why</th><th>re-measured</th><th>figures kept</th></tr>"
        f"{rows}</table></section>"
    )


def _what_it_can_do(results: dict) -> str:
    """With nothing feasible: the nearest misses and what would work (the best figure of each
    missed target, the nearest config, the load that holds: study/what_would_work.py), in place
    of an empty best-versus-baseline comparison."""
    misses = results.get("nearest_misses") or []
    if not misses:
        return "<p class='note'>No trial has been measured yet.</p>"
    rows = "".join(f"<tr><td>#{m['trial']}</td><td>{esc(m.get('reason') or '')}</td></tr>" for m in misses)
    works = results.get("what_would_work")
    lines = WhatWouldWork.from_dict(works).lines() if works else []
    return (
        "<p>No config met every target. The nearest misses:</p>"
        f"<table id='nearest-misses'><tr><th>trial</th><th>why it missed</th></tr>{rows}</table>"
        + (f"<pre id='what-would-work'>{esc(chr(10).join(lines))}</pre>" if lines else "")
    )


def _named(results: dict) -> str:
    note = unconfirmed.line(results)  # searched by workers, confirmed by nobody yet
    return (f"<p id='not-confirmed' class='note'>{esc(note)}</p>" if note else "") + _named_best(results)


def _named_best(results: dict) -> str:
    named = results.get("named_best") or {}
    verdict = results.get("verdict")
    if isinstance(verdict, dict):  # the verdict's lines, as the run's summary prints them
        lines = summary_lines(Verdict.from_dict(verdict))
        items = "".join(f"<li>{esc(line.strip())}</li>" for line in lines[1:])
        return f"<p id='named-best'>{esc(lines[0])}</p><ul id='verdict'>{items}</ul>"
    if not named.get("why"):
        return ""
    return f"<p id='named-best'>Why this one: {esc(named['why'])}.</p>"


def _command(results: dict, info: dict) -> str:
    best = info["best"]
    if not best:
        return "<p class='note'>No feasible config yet.</p>"
    argv = results.get("best_argv") or best.argv
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(best.env.items()))
    return f"<pre id='best-command'>{esc((env + ' ' if env else '') + shlex.join(argv))}</pre>"


def render_report(results: dict) -> str:
    """The whole report as one HTML string (no network needed, no script)."""
    spec = StudySpec.from_dict(results.get("spec") or {})  # parsed once: the header and the Pareto plot
    info = {**ov.overview(results), "workload": spec.workload}
    best, base = info["best"], info["baseline"]
    label = objective_label(info["objectives"][0])
    tuned = sum(1 for o in info["trials"] if o.measured and not o.baseline)
    title = (
        "Throughput against TTFT p95 (a trade-off view)"
        if info["pareto_is_trade_off"]
        else "Pareto set over the study's objectives"
    )
    if best:
        best_section = [
            "<section id='best'><h2>Best config against the baseline</h2>",
            _named(results),
            plot_improvement(info["best_vs_baseline"], best, base, info.get("best_vs_baseline_evidence") or "")
            if base and base.number != best.number
            else "",
            _comparison_table(info),
            "<h3>Best command line</h3>",
            _command(results, info),
            "</section>",
        ]
    else:
        best_section = ["<section id='best'><h2>What this hardware can do</h2>", _what_it_can_do(results), "</section>"]
    sections = [
        _header(info),
        *best_section,
        _cost_energy(results, info),
        f"<section id='tradeoff'><h2>{esc(title)}</h2>",
        plot_pareto(info, spec.targets),
        "</section>",
        fidelity_section(info, label),
        "<section id='flags'><h2>How each flag relates to the objective</h2>",
        plot_importance(results.get("importance"), tuned),
        plot_slice(info, label),
        "</section><section id='history'><h2>Trial history</h2>",
        plot_history(info, label),
        "</section><section id='failures'><h2>Failures by reason</h2>",
        _failures_table(info),
        "</section>",
        _disturbed_table(info),
        time_section(results),
        "<section id='trials'><h2>All trials</h2>",
        _trials_table(info),
        "</section>",
    ]
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>kvtune report: {esc(info['study'])}</title><style>{CSS}</style></head><body><main>"
        + "\n".join(sections)
        + f"<footer class='sub'><p>Generated by kvtune {esc(__version__)} from results.json.</p></footer>"
        "</main></body></html>\n"
    )


def write_report(path: Path, results: dict) -> Path:
    path = Path(path)
    path.write_text(render_report(results), encoding="utf-8")
    return path
