"""The report's plot helpers (artifacts/plots.py): values formatted as the tables show them,
objective names as axes read them, the figure turned into inline SVG whose ids are salted per plot
(so many plots live in one page), and the defaults' and best's marks the report and the
comparison page share. Drawn with matplotlib's SVG backend in memory: no browser, no file."""

from __future__ import annotations

import math
import re

import pytest

from kvtune.artifacts.plots import (
    GREEN,
    ORANGE,
    _figure,
    _svg,
    esc,
    fmt,
    mark_best,
    mark_defaults,
    note,
    num,
    objective_label,
    y_value,
)
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.study.outcome import TrialOutcome


@pytest.mark.parametrize(
    ("value", "key", "shown"),
    [
        (1234.4, "p95_ttft_ms", "1,234 ms"),
        (9.94, "p95_itl_ms", "9.9 ms"),
        (0.015, "error_rate", "1.5%"),
        (3.14159, "output_throughput", "3.14"),
        (1234.56, "output_throughput", "1,234.6"),
        (math.inf, "output_throughput", "–"),
        (None, "", "–"),
        (True, "", "–"),  # a bool is no figure
    ],
)
def test_fmt_shows_a_figure_in_its_unit(value, key, shown):
    assert fmt(value, key) == shown


def test_num_esc_and_note():
    assert num(1) and num(2.5) and not num(math.nan) and not num("3") and not num(False)
    assert esc('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"
    assert note("plot-x", "nothing <here>") == '<p class="note" id="plot-x-note">nothing &lt;here&gt;</p>'


def test_objective_labels_name_the_axis():
    assert objective_label(objective("output_throughput")) == "output tok/s"
    assert objective_label(objective("ttft_p95")) == "TTFT p95 (ms)"
    assert objective_label(objective("capacity")) == "capacity"


def test_y_value_is_the_objective_of_a_measured_trial_only():
    def t(objective_value, metrics):
        return TrialOutcome(
            number=1, candidate=Candidate(), argv=[], env={}, metrics=metrics, objective=objective_value
        )

    assert y_value(t(12.0, {"x": 1.0})) == 12.0
    assert y_value(t(12.0, None)) is None and y_value(t(math.nan, {"x": 1.0})) is None


def test_the_svg_is_inline_its_ids_salted_by_the_plot_and_its_caption_the_label():
    fig = _figure(3.0, 2.0)
    ax = fig.add_subplot()
    mark_defaults(ax, ([1.0], [2.0]), ORANGE, "defaults (#0)")
    mark_best(ax, ([2.0], [3.0]), GREEN, "best (#4)")
    ax.legend()
    svg = _svg(fig, "plot-demo", 'a caption with "quotes"')
    assert svg.startswith('<figure class="plot" id="plot-demo"><svg')
    assert svg.endswith("<figcaption>a caption with &quot;quotes&quot;</figcaption></figure>")
    assert 'aria-label="a caption with &quot;quotes&quot;"' in svg and "<metadata>" not in svg
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert ids and all(i.startswith("plot-demo") for i in ids)
    assert all(ref.startswith("#plot-demo-") for ref in re.findall(r'href="(#[^"]+)"', svg))
    assert "defaults (#0)" in svg and "best (#4)" in svg  # text kept as text: the legend reads


def test_the_defaults_and_best_marks_are_a_hollow_diamond_and_an_edged_star():
    fig = _figure(3.0, 2.0)
    ax = fig.add_subplot()
    mark_defaults(ax, ([1.0], [2.0]), ORANGE, "defaults")
    mark_best(ax, ([2.0], [3.0]), GREEN, "best")
    diamond, star = ax.collections
    assert diamond.get_label() == "defaults" and len(diamond.get_facecolors()) == 0  # hollow
    assert star.get_label() == "best" and star.get_zorder() > diamond.get_zorder()
    assert list(star.get_offsets()[0]) == [2.0, 3.0]
