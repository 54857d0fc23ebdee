"""Open-loop arrival schedules: rate, seeded reproducibility, burstiness."""

from __future__ import annotations

import math

import pytest

from kvtune.bench.arrivals import arrival_offsets, arrival_offsets_for
from kvtune.errors import SpecError


def inter_arrival_stats(offsets: list[float]) -> tuple[float, float]:
    """(mean gap, coefficient of variation) of a schedule: what the tests check it against."""
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    mean = sum(gaps) / len(gaps)
    var = sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)
    return mean, math.sqrt(var) / mean


def test_poisson_mean_gap_matches_rate_over_10k_draws() -> None:
    for rate in (0.5, 4.0, 100.0):
        offs = arrival_offsets(10_001, rate, "poisson", seed=3)
        mean, cv = inter_arrival_stats(offs)
        assert mean == pytest.approx(1.0 / rate, rel=0.03)
        assert cv == pytest.approx(1.0, abs=0.05)  # exponential gaps: CV 1


def test_first_request_is_due_at_zero_and_offsets_increase() -> None:
    offs = arrival_offsets(100, 10.0, seed=1)
    assert offs[0] == 0.0
    assert all(b > a for a, b in zip(offs, offs[1:]))


def test_seeded_and_reproducible() -> None:
    assert arrival_offsets(500, 4.0, seed=7) == arrival_offsets(500, 4.0, seed=7)
    assert arrival_offsets(500, 4.0, seed=7) != arrival_offsets(500, 4.0, seed=8)
    a = arrival_offsets(200, 2.0, "gamma", 0.5, seed=7)
    assert a == arrival_offsets(200, 2.0, "gamma", 0.5, seed=7)


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 2.0, 4.0])
def test_gamma_burstiness_sets_cv_and_keeps_the_rate(burstiness: float) -> None:
    offs = arrival_offsets(20_001, 5.0, "gamma", burstiness, seed=11)
    mean, cv = inter_arrival_stats(offs)
    assert mean == pytest.approx(0.2, rel=0.05)
    assert cv == pytest.approx(1.0 / math.sqrt(burstiness), rel=0.08)


def test_gamma_with_burstiness_one_is_poisson() -> None:
    assert arrival_offsets(50, 3.0, "gamma", 1.0, seed=2) == arrival_offsets(50, 3.0, "poisson", 1.0, seed=2)


def test_constant_gaps() -> None:
    offs = arrival_offsets(5, 4.0, "constant")
    assert offs == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


def test_duration_schedule_is_a_prefix_of_the_same_stream() -> None:
    long = arrival_offsets(1000, 10.0, seed=5)
    within = arrival_offsets_for(20.0, 10.0, seed=5)
    assert within == long[: len(within)]
    assert all(t < 20.0 for t in within) and long[len(within)] >= 20.0
    assert 150 < len(within) < 250  # about rate x duration = 200


@pytest.mark.parametrize(
    ("rate", "arrival", "b"),
    [(0, "poisson", 1.0), (-1, "poisson", 1.0), (math.inf, "poisson", 1.0), (1, "uniform", 1.0), (1, "gamma", 0.0)],
)
def test_bad_parameters_are_spec_errors(rate: float, arrival: str, b: float) -> None:
    with pytest.raises(SpecError):
        arrival_offsets(10, rate, arrival, b)
