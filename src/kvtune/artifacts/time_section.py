"""The report's "Where the time went": a study's hardware-seconds by part and by phase.

Users pay for tuning in hardware time, and on a GPU most of it is start-up, not measurement: the
table shows which parts of the study (the search's trials, the baseline sentinels, the defaults
measured again for the anchor of relative targets, the confirmation's fresh runs, the load
search: `time_spent.PART`, a column only for a part that launched) and which phases of their
launches (study/time_spent.py) took it, so a user sees what a shorter measurement, fewer
confirmation pairs or a compile-cache hit would save.
"""

from __future__ import annotations

from kvtune.artifacts.plots import esc
from kvtune.durations import format_duration
from kvtune.study.time_spent import PART, PARTS, PHASE_TEXT, PHASES, StudyTime


def time_section(results: dict) -> str:
    """The section, or "" when no launch recorded its time (an older results.json)."""
    st = StudyTime.of_results(results)
    if st.launches == 0:
        return ""
    parts = [p for p in PARTS if st.parts[p].launches]
    head = "".join(f"<th title='{esc(PART[p].what)}'>{esc(PART[p].text)}</th>" for p in parts)
    shares = st.shares()
    rows = "".join(
        f"<tr><td>{esc(PHASE_TEXT[ph])}</td>"
        + "".join(f"<td class='num'>{format_duration(st.parts[p].spent.of(ph))}</td>" for p in parts)
        + f"<td class='num'>{format_duration(st.total.of(ph))}</td><td class='num'>{shares[ph]:.0%}</td></tr>"
        for ph in PHASES
    )
    launches = "".join(f"<td class='num'>{st.parts[p].launches}</td>" for p in parts)
    totals = "".join(f"<td class='num'>{format_duration(st.parts[p].spent.total_s)}</td>" for p in parts)
    lines = "".join(f"<li>{esc(line.strip())}</li>" for line in st.lines())
    return (
        "<section id='time-spent'><h2>Where the time went</h2>"
        f"<ul>{lines}</ul><table id='time-table'><tr><th>phase</th>{head}<th>all</th><th>share</th></tr>{rows}"
        f"<tr><th>total</th>{totals}<td class='num'>{format_duration(st.total.total_s)}</td><td></td></tr>"
        f"<tr><th>launches</th>{launches}<td class='num'>{st.launches}</td><td></td></tr></table></section>"
    )
