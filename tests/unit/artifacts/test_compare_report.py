"""The comparison page (artifacts/compare_report.py): one self-contained HTML page (no script, a
CSP that forbids every external reference), every study's measured trials in its own colour with
its best and defaults marked, the side-by-side table and the verdict. The studies are the ones
tests/unit/artifacts/test_compare.py builds (moved here: the page's case)."""

from __future__ import annotations

import re

from kvtune.artifacts.compare_report import COLOURS, _colour, plot_backends, render_compare_report
from kvtune.artifacts.side_by_side import compare_studies
from tests.unit.artifacts.test_compare import LLAMA, VLLM, outcome, results


def test_the_page_plots_one_colour_per_study():
    page = render_compare_report(compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)]))
    assert "default-src 'none'" in page and "<script" not in page
    assert page.count("id='side-by-side'") == 1 and 'id="plot-backends"' in page
    for label in ("llama-server: feasible", "llama-server: missed a target", "vllm: best (#1)", "vllm: defaults (#0)"):
        assert label in page
    assert "Best overall: vllm" in page


def test_the_table_has_a_best_and_a_defaults_row_per_study_and_marks_the_winner():
    page = render_compare_report(compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)]))
    table = re.search(r"<table id='side-by-side'>.*?</table>", page, re.S)
    assert table is not None
    rows = re.findall(r"<tr class='(best|)'>(.*?)</tr>", table.group(0))
    assert len(rows) == 4  # best and defaults of each study
    assert [cls for cls, _ in rows].count("best") == 1
    (winner,) = [body for cls, body in rows if cls == "best"]
    assert "vllm" in winner and "best: trial 1" in winner
    assert "<title>kvtune comparison: S-llama-server vs S-vllm</title>" in page


def test_studies_without_a_measured_trial_get_a_note_not_a_plot():
    empty = results("E-llama-server", "llama-server", [])
    none = results("E-vllm", "vllm", [])
    c = compare_studies([("E-llama-server", empty), ("E-vllm", none)])
    assert plot_backends(c) == '<p class="note" id="plot-backends-note">No trial was measured yet: nothing to plot.</p>'
    page = render_compare_report(c)
    assert "No best overall" in page and "defaults: not measured" in page


def test_each_study_keeps_its_colour_past_the_named_ones():
    named = [_colour(i) for i in range(len(COLOURS))]
    assert named == list(COLOURS)
    beyond = [_colour(len(COLOURS) + k) for k in range(3)]
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in beyond) and len(set(beyond)) == 3


def test_a_missed_trial_is_drawn_hollow_in_its_studys_colour():
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)])
    svg = plot_backends(c)
    assert "llama-server: missed a target" in svg and "vllm: missed a target" not in svg  # vllm missed none


def test_the_page_shows_each_bests_fresh_interval_and_says_when_there_is_no_winner():
    page = render_compare_report(compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)]))
    assert "llama-server&#x27;s best, trial 1: 120 [117.5, 122.5], 3 fresh runs" in page
    once = results("S-vllm", "vllm", [outcome(0, 150, 200), outcome(1, 500, 250)])
    page = render_compare_report(compare_studies([("S-llama-server", LLAMA), ("S-vllm", once)]))
    assert "No best overall: no winner: not measured the same way" in page
    assert "vllm&#x27;s best, trial 1: no fresh runs (not confirmed: its search measurement only)" in page
