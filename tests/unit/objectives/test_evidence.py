"""Spreads, ties within noise, adaptive repeats and the named best."""

from __future__ import annotations

import math

import pytest

from kvtune.kinds import Direction
from kvtune.objectives.named_best import (
    ConfirmedConfig,
    Estimate,
    changed_from_defaults,
    choose_named_best,
    converged,
    convergence_key,
    estimate,
    overlap,
    simplicity,
    t95,
)
from kvtune.objectives.noise import Noise

# A measured study noise: 2% relative SD with 10 degrees of freedom (t95 = 2.228).
QUIET = Noise(0.02, 10, (1, 2, 3))


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


def test_the_printed_spread_is_the_studys_noise_and_says_so():
    e = estimate([100.0, 100.0])  # identical values: their own spread would be 0
    assert e.spread(QUIET) == pytest.approx(2.228 * 0.02 * 100 / math.sqrt(2))
    assert e.format(QUIET) == "100 +/- 3.2 (pooled noise 2.0%, 10 dof)"
    once = estimate([100.0])
    assert once.n == 1 and math.isnan(once.half_width)
    assert once.spread() == pytest.approx(1.96 * 0.10 * 100)  # the prior, before any repeat
    assert once.format() == "100 +/- 20 (prior 10%, not measured: no repeats yet)"
    assert "measured once" not in once.format()  # the caller says how often it was measured


def test_identical_values_have_zero_spread():
    assert estimate([5.0, 5.0, 5.0]).half_width == 0.0


@pytest.mark.parametrize("values", [[], [1.0, math.inf], [math.nan]])
def test_estimate_refuses_empty_or_non_finite(values):
    with pytest.raises(ValueError):
        estimate(values)


def test_overlap_is_the_difference_interval_on_the_log_scale():
    width = 2.228 * 0.02 * math.sqrt(1 / 3 + 1 / 3)  # 0.0364
    a = Estimate(100.0, 0.0, 3)
    assert overlap(a, Estimate(100 * math.exp(width * 0.99), 0.0, 3), QUIET)
    assert not overlap(a, Estimate(100 * math.exp(width * 1.01), 0.0, 3), QUIET)
    assert overlap(Estimate(103.0, 0.0, 3), a, QUIET) == overlap(a, Estimate(103.0, 0.0, 3), QUIET)
    # single measurements under the prior: 1.96 * 10% * sqrt(2) = 27.7% on the log scale
    assert overlap(Estimate(100.0, math.nan, 1), Estimate(130.0, math.nan, 1))
    assert not overlap(Estimate(100.0, math.nan, 1), Estimate(135.0, math.nan, 1))
    assert not overlap(Estimate(100.0, math.nan, 1), Estimate(112.0, math.nan, 1), QUIET)
    # a mean that is not positive is compared on the linear scale
    assert overlap(Estimate(0.0, math.nan, 1), Estimate(0.0, math.nan, 1), QUIET)
    assert not overlap(Estimate(-1.0, math.nan, 1), Estimate(1.0, math.nan, 1), QUIET)


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


def test_converged_ignores_runs_without_a_finite_figure():
    # issue 22: a baseline whose requests all failed has an infinite latency; it raised ValueError
    assert not converged([math.inf, math.inf])
    assert converged([math.inf, math.inf, math.inf], cap=3)
    assert converged([math.inf, 100.0, 100.0])  # the finite ones converge
    assert not converged([math.nan, 100.0])  # a missing key (NaN) is not a figure


def test_costs_converge_on_the_throughput_they_are_computed_from():
    assert convergence_key("cost_per_mtok") == "output_throughput"
    assert convergence_key("cost_per_mtok_total") == "total_token_throughput"
    assert convergence_key("p95_ttft_ms") == "p95_ttft_ms"


def test_changed_from_defaults_counts_flags_and_environment():
    defaults = {"batch-size": 2048, "cont-batching": True, "env:OMP_NUM_THREADS": "2"}
    assert changed_from_defaults({}, {}, defaults) == 0  # the baseline
    assert changed_from_defaults({"batch-size": 2048, "threads": 2}, {}, defaults) == 1
    assert changed_from_defaults({"batch-size": 512}, {"OMP_NUM_THREADS": "2"}, defaults) == 1
    assert changed_from_defaults({"batch-size": 512}, {"OMP_NUM_THREADS": "1", "X": "y"}, defaults) == 3
    assert changed_from_defaults({"batch-size": 2048}, {"X": "y"}, None) == 2  # nothing known


def test_simplicity_counts_changes_from_defaults():
    assert simplicity({}) == 0
    assert simplicity({"threads": 2, "batch-size": 512}) == 2
    assert simplicity({"threads": 2, "batch-size": 512}, {"batch-size": "512"}) == 1
    assert simplicity({"threads": 2, "flash-attn": None}, {"threads": 4}) == 1
    assert simplicity({"cont-batching": True}, {"cont-batching": "true"}) == 0
    assert simplicity({"threads": 2}, {"threads": 2}) == 0  # a baseline has 0


def C(number, values, flags, baseline=False):
    return ConfirmedConfig(number, values, flags, baseline)


def name(cands, direction="maximize", noise=QUIET):
    return choose_named_best(cands, direction, noise)


def test_clear_best_is_named():
    d = name([C(0, [100, 101, 99], 0, True), C(3, [130, 131, 129], 4), C(5, [115, 116, 114], 1)], Direction.MAXIMIZE)
    assert d.number == 3 and d.tied_with == []
    assert d.why.startswith("best by more than the noise")


def test_tie_goes_to_the_config_with_fewer_flags():
    d = name(
        [C(0, [100, 101, 99], 0, True), C(3, [130, 132, 128], 4), C(5, [128, 130, 126], 1), C(7, [129, 131, 127], 2)],
        "maximize",
    )
    assert d.number == 5
    assert "tied within noise" in d.why and "trial 3" in d.why and "1 flag changed" in d.why
    assert d.tied_with == [3, 7]


def test_tie_with_the_baseline_names_the_defaults():
    d = name([C(0, [100, 104, 96], 0, True), C(3, [103, 105, 101], 4)], "maximize")
    assert d.number == 0
    assert d.why.startswith("no change beat the defaults by more than the noise")
    assert d.tied_with == [3]


def test_defaults_measured_best():
    d = name([C(0, [100.0], 0, True), C(3, [80.0], 2)], Direction.MAXIMIZE)
    assert d.number == 0 and "no change beat the defaults" in d.why


def test_minimize_ranks_low_first_and_tie_with_more_flags_keeps_the_best():
    d = name([C(1, [200, 202, 198], 1), C(2, [203, 205, 201], 3), C(0, [400, 400, 400], 0, True)], Direction.MINIMIZE)
    assert d.number == 1 and d.tied_with == [2]
    assert "none of which changes fewer flags from the server's defaults" in d.why


def test_single_measurements_tie_through_the_prior_until_noise_is_measured():
    cands = [C(0, [100.0], 0, True), C(4, [112.0], 3)]
    prior = choose_named_best(cands, "maximize")  # ln 1.12 = 0.113 <= 1.96 * 0.1 * sqrt 2
    assert prior.number == 0 and "prior 10%, not measured" in prior.why
    measured = name(cands)  # 0.113 > 2.228 * 0.02 * sqrt 2 = 0.063
    assert measured.number == 4 and "pooled noise 2.0%, 10 dof" in measured.why


def test_ties_are_with_the_best_not_chained():
    # trial 2 ties trial 1 but not the best (trial 3): it is not named although it is simplest
    d = name([C(3, [130, 131, 129], 5), C(1, [127, 128, 126], 4), C(2, [124, 125, 123], 0)], "maximize")
    assert d.number == 1 and d.tied_with == [3]


def test_only_candidate_and_bad_input():
    assert name([C(2, [5.0, 5.1], 1)]).why == "the only confirmed config"
    with pytest.raises(ValueError):
        choose_named_best([], "maximize")
    with pytest.raises(ValueError):
        name([C(1, [1.0], 0), C(1, [2.0], 0)], "maximize")
    with pytest.raises(ValueError):
        name([C(1, [1.0], 0, True), C(2, [2.0], 0, True)], "maximize")
