"""The report's "speed against fidelity" view: every measured config's objective against how far
its answers moved from the defaults' (the KL upper bound the gate reads), the gate's threshold
drawn, refused configs marked. Only a study whose gate was on has one; otherwise a note says
why (off, or no flag in the space changes the numerics)."""

from __future__ import annotations

from typing import Any

from kvtune.artifacts.plots import GREEN, GREY, ORANGE, RED, _figure, _svg, esc, mark_best, mark_defaults, note, num
from kvtune.study.fidelity_gate import ON, GateReport

PLOT_ID = "plot-fidelity"


def fidelity_section(info: dict, label: str) -> str:
    """The section: the gate's lines, then the plot (or the note)."""
    gate: GateReport = info["fidelity"]
    lines = "".join(f"<p>{esc(line.strip())}</p>" for line in gate.lines())
    return f"<section id='fidelity'><h2>Speed against fidelity</h2>{lines}{plot_fidelity(info, label)}</section>"


def plot_fidelity(info: dict, label: str) -> str:
    gate: GateReport = info["fidelity"]
    if gate.state != ON or gate.target is None:
        return note(PLOT_ID, "No config was probed: " + gate.lines()[0])
    refused = {r.outcome.number for r in gate.refused}
    pts = [o for o in info["trials"] if o.measured and num(o.objective) and o.fidelity]
    raw: dict[int, Any] = {o.number: (o.fidelity or {}).get("kld_upper") for o in pts}
    kl = {n: float(v) for n, v in raw.items() if num(v)}
    pts = [o for o in pts if o.number in kl]
    if not pts:
        return note(PLOT_ID, "No measured config carries a fidelity figure yet.")
    fig = _figure(9.0, 4.6)
    ax = fig.add_subplot()
    xy = lambda ts: ([kl[o.number] for o in ts], [float(o.objective) for o in ts])  # noqa: E731
    kept = [o for o in pts if o.number not in refused]
    out = [o for o in pts if o.number in refused]
    if kept:
        ax.scatter(*xy(kept), s=36, color=GREY, label="answers like the defaults", zorder=3)
    if out:
        ax.scatter(*xy(out), s=60, color=RED, marker="x", label="refused for fidelity", zorder=3)
    for o in pts:
        ax.annotate(f"#{o.number}", (kl[o.number], o.objective), xytext=(4, 4), textcoords="offset points", fontsize=7)
    base, best = info["baseline"], info["best"]
    drawn = {o.number for o in pts}
    if base is not None and base.number in drawn:
        mark_defaults(ax, xy([base]), ORANGE, f"defaults (#{base.number}): the reference")
    if best is not None and best.number in drawn:
        mark_best(ax, xy([best]), GREEN, f"best (#{best.number})")
    ax.axvline(gate.target.threshold, color=RED, lw=1.4, label=f"gate {gate.target.text}")
    ax.set_xlabel("KL divergence from the defaults' answers, 95% upper bound  ← closer")
    ax.set_ylabel(f"{label}  (first measurement)")
    ax.grid(alpha=0.25)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    caption = (
        "Each measured config's objective against how far its greedy answers to the reference prompts moved "
        "from the defaults' (0: not probed, nothing in it changes the numerics, or identical answers); "
        "right of the red line a config is refused, however fast."
    )
    return _svg(fig, PLOT_ID, caption)
