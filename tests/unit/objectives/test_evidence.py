"""Spreads, ties within noise, adaptive repeats and the named best."""

from __future__ import annotations

import math

import pytest

from kvtune.kinds import Direction
from kvtune.objectives.evidence import (NOISE_FLOOR, Candidate, Estimate, choose_named_best,
                                        converged, estimate, overlap, simplicity, t95)


def test_t_table_and_normal_tail():
    assert t95(1) == 12.706
    assert t95(4) == 2.776
    assert t95(30) == 2.042
    assert t95(31) == 1.96
    with pytest.raises(ValueError):
        t95(0)


def test_estimate_is_mean_and_t_half_width():
    e = estimate([10.0, 12.0, 14.0])  # sd 2, n 3, df 2
    assert e.mean == pytest.approx(12.0)
    assert e.half_width == pytest.approx(4.303 * 2 / math.sqrt(3))
    assert e.n == 3
    assert e.format() == "12 +/- 5"


def test_single_value_has_unknown_spread_and_uses_the_noise_floor():
    e = estimate([100.0])
    assert e.n == 1 and math.isnan(e.half_width)
    assert e.spread() == pytest.approx(100.0 * NOISE_FLOOR)
    assert e.spread(0.02) == pytest.approx(2.0)
    assert e.format() == "100 (measured once)"


def test_identical_values_have_zero_spread():
    assert estimate([5.0, 5.0, 5.0]).half_width == 0.0


@pytest.mark.parametrize("values", [[], [1.0, math.inf], [math.nan]])
def test_estimate_refuses_empty_or_non_finite(values):
    with pytest.raises(ValueError):
        estimate(values)


def test_overlap_rule_is_touching_intervals():
    a = Estimate(100.0, 3.0, 3)
    assert overlap(a, Estimate(106.0, 3.0, 3))  # 100+3 meets 106-3
    assert not overlap(a, Estimate(106.01, 3.0, 3))
    assert overlap(Estimate(106.0, 3.0, 3), a)  # symmetric
    # single measurements: 8% of each mean stands in for the spread
    assert overlap(Estimate(100.0, math.nan, 1), Estimate(115.0, math.nan, 1))  # 8 + 9.2 >= 15
    assert not overlap(Estimate(100.0, math.nan, 1), Estimate(120.0, math.nan, 1))
    assert not overlap(Estimate(100.0, math.nan, 1), Estimate(115.0, math.nan, 1), noise=0.05)


def test_converged_within_three_percent_or_at_the_cap():
    assert not converged([100.0])  # one value never converges on its own
    assert converged([100.0, 100.0])
    assert converged([100.0, 101.0, 100.5])  # half-width ~1.24 <= 3.02
    assert not converged([100.0, 110.0])  # df 1: half-width ~63.5
    assert not converged([100.0, 110.0, 90.0, 105.0])
    assert converged([100.0, 110.0, 90.0, 105.0, 95.0])  # the cap of 5
    assert converged([100.0, 110.0], cap=2)
    assert converged([100.0], cap=1)
    assert converged([100.0, 110.0], rel_half_width=0.7)
    with pytest.raises(ValueError):
        converged([1.0], cap=0)
    with pytest.raises(ValueError):
        converged([1.0], rel_half_width=0)


def test_simplicity_counts_changes_from_defaults():
    assert simplicity({}) == 0
    assert simplicity({"threads": 2, "batch-size": 512}) == 2
    assert simplicity({"threads": 2, "batch-size": 512}, {"batch-size": "512"}) == 1
    assert simplicity({"threads": 2, "flash-attn": None}, {"threads": 4}) == 1
    assert simplicity({"cont-batching": True}, {"cont-batching": "true"}) == 0
    assert simplicity({"threads": 2}, {"threads": 2}) == 0  # a baseline has 0


def C(number, values, flags, baseline=False):
    return Candidate(number, values, flags, baseline)


def test_clear_best_is_named():
    d = choose_named_best([C(0, [100, 101, 99], 0, True), C(3, [130, 131, 129], 4),
                           C(5, [115, 116, 114], 1)], Direction.MAXIMIZE)
    assert d.number == 3 and d.tied_with == []
    assert d.why.startswith("best by more than the noise")


def test_tie_goes_to_the_config_with_fewer_flags():
    d = choose_named_best([C(0, [100, 101, 99], 0, True), C(3, [130, 132, 128], 4),
                           C(5, [128, 130, 126], 1), C(7, [129, 131, 127], 2)], "maximize")
    assert d.number == 5
    assert "tied within noise" in d.why and "trial 3" in d.why and "1 flag changed" in d.why
    assert d.tied_with == [3, 7]


def test_tie_with_the_baseline_names_the_defaults():
    d = choose_named_best([C(0, [100, 104, 96], 0, True), C(3, [103, 105, 101], 4)], "maximize")
    assert d.number == 0
    assert d.why.startswith("no change beat the defaults by more than the noise")
    assert d.tied_with == [3]


def test_defaults_measured_best():
    d = choose_named_best([C(0, [100.0], 0, True), C(3, [80.0], 2)], Direction.MAXIMIZE)
    assert d.number == 0 and "no change beat the defaults" in d.why


def test_minimize_ranks_low_first_and_tie_with_more_flags_keeps_the_best():
    d = choose_named_best([C(1, [200, 202, 198], 1), C(2, [203, 205, 201], 3),
                           C(0, [400, 400, 400], 0, True)], Direction.MINIMIZE)
    assert d.number == 1 and d.tied_with == [2]
    assert "none of which changes fewer flags" in d.why


def test_single_measurements_tie_through_the_noise_floor():
    cands = [C(0, [100.0], 0, True), C(4, [112.0], 3)]
    assert choose_named_best(cands, "maximize").number == 0  # 8 + 8.96 >= 12
    assert choose_named_best(cands, "maximize", noise=0.04).number == 4


def test_ties_are_with_the_best_not_chained():
    # trial 2 ties trial 1 but not the best (trial 3): it is not named although it is simplest
    d = choose_named_best([C(3, [130, 131, 129], 5), C(1, [127, 128, 126], 4),
                           C(2, [124, 125, 123], 0)], "maximize")
    assert d.number == 1 and d.tied_with == [3]


def test_only_candidate_and_bad_input():
    assert choose_named_best([C(2, [5.0, 5.1], 1)], "maximize").why == "the only confirmed config"
    with pytest.raises(ValueError):
        choose_named_best([], "maximize")
    with pytest.raises(ValueError):
        choose_named_best([C(1, [1.0], 0), C(1, [2.0], 0)], "maximize")
    with pytest.raises(ValueError):
        choose_named_best([C(1, [1.0], 0, True), C(2, [2.0], 0, True)], "maximize")
