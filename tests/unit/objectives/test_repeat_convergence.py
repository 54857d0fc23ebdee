"""`--repeats auto`: the mean and half-width of one config's runs on its server, and when they
have converged (objectives/repeat_convergence.py)."""

from __future__ import annotations

import math

import pytest

from kvtune.objectives.repeat_convergence import converged, convergence_key, estimate


def test_estimate_is_mean_and_t_half_width():
    e = estimate([10.0, 12.0, 14.0])  # sd 2, n 3, df 2
    assert e.mean == pytest.approx(12.0)
    assert e.half_width == pytest.approx(4.303 * 2 / math.sqrt(3), rel=1e-4)
    assert e.n == 3


def test_identical_values_have_zero_spread():
    assert estimate([5.0, 5.0, 5.0]).half_width == 0.0


@pytest.mark.parametrize("values", [[], [1.0, math.inf], [math.nan]])
def test_estimate_refuses_empty_or_non_finite(values):
    with pytest.raises(ValueError):
        estimate(values)


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
