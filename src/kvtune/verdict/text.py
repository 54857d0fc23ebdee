"""The verdict in lines for people: one text for the run's summary, `kvtune show` and the report."""

from __future__ import annotations

from kvtune.verdict.record import Verdict


def summary_lines(v: Verdict) -> list[str]:
    """The verdict as the run's summary, `kvtune show` and the report print it: the decision
    and its reason, the effects with 95% intervals, each target's figures on fresh servers, the
    smallest detectable gain, the evidence counted."""
    lines = [f"Verdict: {v.kind.value}. {v.reason}"]
    if v.effects:
        n = v.effects[0].n
        lines.append(
            f"  effect of trial {v.candidate} against the defaults ({n} fresh run{'s' if n != 1 else ''} each, 95% CI): "
            + "; ".join(f"{e.metric} {e.text()}" for e in v.effects)
        )
    for check in v.targets:
        who = "the defaults" if check.who == "defaults" else f"trial {v.candidate}"
        lines.append(f"  {who} {check.shown} {check.text()}")
    if v.counted.pairs or v.counted.screened:
        lines.append("  " + v.detectable_text())
        c = v.counted
        lines.append(
            f"  evidence: {c.screened} screening run(s), {c.pairs} pair(s) D W W D over {c.looks} look(s)"
            + (f", {c.disturbed} disturbed run(s) not used" if c.disturbed else "")
            + f"; false wins held to {v.alpha:.0%} (group-sequential test, docs/verdicts.md)"
        )
    return lines
