"""Targets no measurement can meet are refused when parsed (issue 41), drawn over the class: an
upper bound of zero for every metric (none is below 0) in every unit and statistic, zero or below
as an inclusive bound for every latency and throughput (each is above 0 once a request is
served), a rate above 100%, and two bounds on one metric that exclude each other, whether both
are absolute thresholds or both factors of the baseline."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtune.errors import TargetError
from kvtune.objectives.metrics import LATENCY_METRICS
from kvtune.objectives.targets import RATE_METRICS, STATS, THROUGHPUT_METRICS, parse_target, parse_targets

ZEROS = st.sampled_from(["0", "0.0", "0e3", ".0", "00"])
UNITS = {
    **{m: ["s", "ms", "us"] for m in LATENCY_METRICS},
    **{m: ["%", ""] for m in RATE_METRICS},
    **{m: ["", unit] for m, unit in THROUGHPUT_METRICS.items()},
}
NAMES = [f"{m}_{s}" for m in LATENCY_METRICS for s in STATS] + list(LATENCY_METRICS)
NAMES += list(RATE_METRICS) + list(THROUGHPUT_METRICS)


def metric_of(name: str) -> str:
    return next(m for m in UNITS if name == m or name.startswith(m + "_") and m in LATENCY_METRICS)


@st.composite
def zero_bounds(draw, ops: tuple[str, ...], names: list[str]) -> str:
    name = draw(st.sampled_from(names))
    unit = draw(st.sampled_from(UNITS[metric_of(name)]))
    return f"{name}{draw(st.sampled_from(ops))}{draw(ZEROS)}{unit}"


@settings(max_examples=300, deadline=None)
@given(zero_bounds(("<",), NAMES))
def test_below_zero_is_refused_for_every_metric(text):
    with pytest.raises(TargetError, match=r"can never hold: \w+ is never below 0"):
        parse_target(text)


POSITIVE = [n for n in NAMES if metric_of(n) not in RATE_METRICS]


@settings(max_examples=300, deadline=None)
@given(zero_bounds(("<=",), POSITIVE))
def test_zero_or_below_is_refused_for_every_latency_and_throughput(text):
    with pytest.raises(TargetError, match=r"can never hold: \w+ is always above 0"):
        parse_target(text)


@pytest.mark.parametrize("metric", RATE_METRICS)
def test_a_rate_may_be_held_at_zero_and_never_above_all(metric):
    assert parse_target(f"{metric}<=0%").threshold == 0.0  # error_rate<=0%: no request may fail
    with pytest.raises(TargetError, match="is never above 100%"):
        parse_target(f"{metric}>100%")


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([n for n in NAMES if metric_of(n) not in RATE_METRICS]),
    st.floats(0.01, 5, allow_nan=False),
    st.floats(0.01, 5, allow_nan=False),
    st.sampled_from(["<", "<="]),
    st.sampled_from([">", ">="]),
)
def test_relative_bounds_on_one_metric_are_refused_exactly_when_they_exclude_each_other(name, up, low, u_op, l_op):
    upper, lower = f"{name}{u_op}{up:.2f}x", f"{name}{l_op}{low:.2f}x"
    u, lo = round(up, 2), round(low, 2)
    if u < lo or (u == lo and (u_op == "<" or l_op == ">")):
        with pytest.raises(TargetError, match="contradict each other"):
            parse_targets([upper, lower])
    else:
        assert len(parse_targets([upper, lower])) == 2


def test_a_relative_and_an_absolute_bound_are_not_compared():
    """0.5x of a baseline not measured yet may well be above 800 ms: nothing to refuse."""
    assert len(parse_targets(["ttft<0.5x", "ttft>800ms"])) == 2
