"""A trace's replay sized to the host's measured speed (bench/trace_demand.py): the speed from a
probe's medians, the serial demand, the largest two-digit length scale whose replay fits a
quarter of the request timeout, and the header line that says so."""

from __future__ import annotations

import pytest

from kvtune.bench.trace_demand import (
    BUDGET_SHARE,
    MIN_SCALE,
    HostSpeed,
    _round_down,
    fit_demand,
    speed_from_probe,
)
from kvtune.bench.traces import TraceRequest

SPEED = HostSpeed(prefill_s_per_token=0.004, decode_s_per_token=0.025, probe_prompt_tokens=1024)


def requests_at(scale: float, n: int = 32, prompt: int = 5000, output: int = 300) -> tuple[TraceRequest, ...]:
    """n requests of a trace of `prompt` / `output` tokens each, lengths times `scale` (>= 1)."""
    return tuple(TraceRequest(float(i), max(1, round(prompt * scale)), max(1, round(output * scale))) for i in range(n))


def test_the_speed_is_the_medians_of_the_answered_probe_requests() -> None:
    speed = speed_from_probe([(1000, 4.0, 0.02), (1000, 40.0, 0.5), (1000, 5.0, 0.03)])
    assert speed == HostSpeed(prefill_s_per_token=0.005, decode_s_per_token=0.03, probe_prompt_tokens=1000)
    assert speed_from_probe([]) is None
    assert speed_from_probe([(1000, 4.0, None)]) is None  # one-token answers: no decode speed


def test_demand_is_the_serial_service_time() -> None:
    reqs = (TraceRequest(0.0, 1000, 10), TraceRequest(1.0, 500, 20))
    assert SPEED.service_s(reqs) == pytest.approx(1500 * 0.004 + 30 * 0.025)


def test_a_replay_within_the_budget_keeps_its_lengths() -> None:
    fit = fit_demand(lambda s: requests_at(s, n=2, prompt=1000, output=50), SPEED, timeout_s=120.0)
    assert fit.budget_s == 120.0 * BUDGET_SHARE == 30.0
    assert (fit.scale, fit.scaled) == (1.0, False)
    assert fit.asked_s == fit.fitted_s == pytest.approx(2 * (4.0 + 1.25))
    assert fit.describe() == (
        "the server's defaults prefilled 250 tokens/s (a 1024-token prompt) and decoded 40 tokens/s here; "
        "the trace's 2 requests ask ~10 s served one at a time, within a trial's 30 s (a quarter of the "
        "120 s request timeout): replayed at the recorded lengths"
    )


def test_a_replay_beyond_the_budget_gets_the_largest_two_digit_scale_that_fits() -> None:
    fit = fit_demand(requests_at, SPEED, timeout_s=120.0)
    per_request = 5000 * 0.004 + 300 * 0.025  # 27.5 s
    assert fit.asked_s == pytest.approx(32 * per_request)  # 880 s
    assert fit.scaled and fit.fitted_s <= fit.budget_s
    assert fit.scale == _round_down(30.0 / 880.0 * 0.98) == 0.033
    assert fit.fitted_s > fit.budget_s * 0.9  # demand is near-linear here: little is given away
    assert "more than a trial's 30 s" in fit.describe()
    assert (
        "lengths scaled by 0.033 (~29 s); workload.trace_length_scale: 1 replays the recorded lengths" in fit.describe()
    )


def test_a_longer_request_timeout_is_a_larger_budget() -> None:
    short = fit_demand(requests_at, SPEED, timeout_s=120.0)
    long = fit_demand(requests_at, SPEED, timeout_s=1200.0)
    assert long.budget_s == 300.0 and long.scale > short.scale * 9


def test_the_scale_starts_from_the_users_and_never_goes_below_the_floor() -> None:
    fit = fit_demand(lambda s: requests_at(s, n=1000), SPEED, timeout_s=1.0, asked_scale=0.5)
    assert fit.asked_scale == 0.5 and fit.scale == MIN_SCALE  # 1000 one-token requests still ask too much


@pytest.mark.parametrize("x,cut", [(0.0149, 0.014), (0.99, 0.99), (1.0, 1.0), (0.1, 0.1), (0.12345, 0.12), (3.99, 3.9)])
def test_the_scale_is_cut_to_two_digits_never_rounded_up(x: float, cut: float) -> None:
    assert _round_down(x) == cut
