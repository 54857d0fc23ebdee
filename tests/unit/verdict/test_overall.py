"""Issue 37: one standard of proof beyond the proof itself. A re-measured config the proof did not
test is judged by the same target tests at its fixed number of runs (verdict/target_checks.py
`fixed_checks`), and the best overall of several studies is the verdict's two-sample test on
fresh runs, or none (verdict/overall.py). Error rates are simulated through the same code."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from kvtune.verdict import ALPHA, OBJECTIVE, Role, Run, TargetTest
from kvtune.verdict.overall import best_overall, spread
from kvtune.verdict.target_checks import MET, MISSED, UNCLEAR, fixed_checks, shown

TTFT = TargetTest("ttft_p95<1s", "p95_ttft_ms", upper=True, threshold=1000.0)
RELATIVE = TargetTest("ttft_p95<2x", "p95_ttft_ms", upper=True, factor=2.0)


def runs(*ms: float) -> list[Run]:
    return [Run(1, Role.PROOF, {OBJECTIVE: 10.0, "p95_ttft_ms": v}) for v in ms]


def test_one_run_shows_a_latency_neither_met_nor_missed_more_runs_show_it():
    assert [c.shown for c in fixed_checks([TTFT], runs(1500.0), [], ALPHA)] == [UNCLEAR]
    assert [c.shown for c in fixed_checks([TTFT], runs(1500.0, 1520.0, 1490.0), [], ALPHA)] == [MISSED]
    met = fixed_checks([TTFT], runs(500.0, 510.0, 495.0), [], ALPHA)
    assert [c.shown for c in met] == [MET] and met[0].unit == "ms" and shown(met) == MET
    # close to the bound with a spread: not shown either way
    assert shown(fixed_checks([TTFT], runs(950.0, 1050.0, 1000.0), [], ALPHA)) == UNCLEAR


def test_a_relative_target_is_held_to_the_defaults_fresh_runs_and_is_certain_for_the_defaults():
    base = runs(100.0, 110.0, 105.0)
    assert shown(fixed_checks([RELATIVE], runs(150.0, 155.0), base, ALPHA)) == MET
    assert shown(fixed_checks([RELATIVE], runs(400.0, 410.0), base, ALPHA)) == MISSED
    assert shown(fixed_checks([RELATIVE], base, base, ALPHA, defaults=True)) == MET


def test_the_fixed_test_is_one_sided_student_t_at_alpha():
    """Three runs exactly at the t boundary: just inside is met, just outside is unclear."""
    sd, n = 0.05, 3
    c = stats.t.ppf(1 - ALPHA, n - 1) * sd / math.sqrt(n)
    logs = [-sd, 0.0, sd]  # sample SD exactly `sd`
    inside = [1000.0 * math.exp(x - c * 1.01) for x in logs]
    outside = [1000.0 * math.exp(x - c * 0.99) for x in logs]
    assert shown(fixed_checks([TTFT], runs(*inside), [], ALPHA)) == MET
    assert shown(fixed_checks([TTFT], runs(*outside), [], ALPHA)) == UNCLEAR


def test_a_clear_difference_is_named_and_overlapping_sides_are_not():
    clear = best_overall({"a": [100.0, 102.0, 98.0], "b": [150.0, 149.0, 152.0]}, maximize=True)
    assert clear.winner == "b" and clear.top == "b" and clear.rival == "a" and clear.low > 1.0
    assert clear.confidence == pytest.approx(1 - ALPHA) and "(96% interval)" in clear.ratio_text()
    close = best_overall({"a": [100.0, 112.0, 95.0], "b": [104.0, 99.0, 110.0]}, maximize=True)
    assert close.winner is None and close.low < 1.0 < close.high
    lower = best_overall({"a": [100.0, 102.0, 98.0], "b": [150.0, 149.0, 152.0]}, maximize=False)
    assert lower.winner == "a"  # a latency: lower is better


def test_with_three_sides_the_top_must_beat_each_at_alpha_over_three():
    sides = {"a": [100.0, 101.0, 99.0], "b": [130.0, 131.0, 129.0], "c": [131.0, 125.0, 138.0]}
    o = best_overall(sides, maximize=True)
    assert o.top == "c" and o.winner is None and o.rival == "b"  # not shown better than b
    assert o.confidence == pytest.approx(1 - 2 * ALPHA / 3)


def test_one_run_a_side_shows_nothing():
    o = best_overall({"a": [100.0], "b": [200.0]}, maximize=True)
    assert o.winner is None and o.low == 0.0 and math.isinf(o.high)
    assert spread([100.0]).text() == "100, 1 fresh run (no interval from one run)"
    assert spread([]) is None
    with pytest.raises(ValueError):
        best_overall({"a": [100.0]}, maximize=True)


def test_false_winners_between_equal_sides_stay_at_alpha():
    """2,000 comparisons of two sides that do not differ (CV 10%, 3 to 9 runs each): the share
    named is at most alpha (4%); with three equal sides, too."""
    rng = random.Random(37)
    for k in (2, 3):
        named = 0
        for _ in range(2000):
            n = rng.randint(3, 9)
            sides = {str(i): [100.0 * math.exp(rng.gauss(0, 0.1)) for _ in range(n)] for i in range(k)}
            named += best_overall(sides, maximize=True).winner is not None
        assert named / 2000 <= ALPHA + 0.01, (k, named)
