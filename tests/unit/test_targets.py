import math

import pytest

from kvtune.errors import TargetError
from kvtune.objectives.targets import (MAX_MARGIN, parse_target, parse_targets,
                                       with_default_error_target)


@pytest.mark.parametrize("text,key,op,threshold", [
    ("ttft<1s", "p95_ttft_ms", "<", 1000.0),
    ("ttft_p99<800ms", "p99_ttft_ms", "<", 800.0),
    ("tpot<50ms", "p95_tpot_ms", "<", 50.0),
    ("itl_p95<100ms", "p95_itl_ms", "<", 100.0),
    ("e2el<10s", "p95_e2el_ms", "<", 10000.0),
    ("error_rate<1%", "error_rate", "<", 0.01),
    ("error_rate<=0.05", "error_rate", "<=", 0.05),
    ("ttft_mean >= 0.5 s", "mean_ttft_ms", ">=", 500.0),
    ("ttft_p50<2s", "median_ttft_ms", "<", 2000.0),
    ("TTFT<1S", "p95_ttft_ms", "<", 1000.0),
    ("output_throughput>100", "output_throughput", ">", 100.0),
    ("output_throughput>=100tok/s", "output_throughput", ">=", 100.0),
])
def test_valid_targets(text, key, op, threshold):
    t = parse_target(text)
    assert (t.key, t.op) == (key, op)
    assert t.threshold == pytest.approx(threshold)


def test_bare_metric_means_p95():
    assert parse_target("ttft<1s").stat == "p95"
    assert "p95" in parse_target("tpot<50ms").describe()


@pytest.mark.parametrize("text,fragment", [
    ("", "cannot parse"),
    ("ttft", "cannot parse"),
    ("ttft<", "cannot parse"),
    ("ttft<1", "needs a time unit"),
    ("ttft<1h", "needs a time unit"),
    ("ttft=1s", "cannot parse"),
    ("latency<1s", "unknown metric"),
    ("ttft_p42<1s", "unknown metric"),
    ("error_rate<1ms", "error_rate takes"),
    ("error_rate<150%", "cannot exceed"),
    ("ttft<-1s", "cannot parse"),
    ("output_throughput>5ms", "tok/s"),
])
def test_malformed_targets_name_the_problem(text, fragment):
    with pytest.raises(TargetError) as e:
        parse_target(text)
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_contradictory_targets():
    with pytest.raises(TargetError, match="contradict"):
        parse_targets(["ttft<1s", "ttft>2s"])
    with pytest.raises(TargetError, match="contradict"):
        parse_targets(["ttft<1s", "ttft>1s"])
    parse_targets(["ttft<=1s", "ttft>=1s"])  # a single point is allowed
    parse_targets(["ttft<1s", "ttft_p99>2s"])  # different statistics do not clash


def test_margins_are_relative_and_signed():
    t = parse_target("ttft<1s")
    assert t.margin({"p95_ttft_ms": 500}) == pytest.approx(-0.5)
    assert t.margin({"p95_ttft_ms": 1500}) == pytest.approx(0.5)
    assert t.margin({"p95_ttft_ms": 1000}) > 0  # strict bound not met at equality
    assert parse_target("ttft<=1s").margin({"p95_ttft_ms": 1000}) == 0
    assert t.margin({"p95_ttft_ms": math.inf}) == MAX_MARGIN
    assert t.margin({}) == MAX_MARGIN  # a missing measurement is never feasible
    lower = parse_target("output_throughput>100")
    assert lower.margin({"output_throughput": 150}) == pytest.approx(-0.5)
    assert lower.margin({"output_throughput": 50}) == pytest.approx(0.5)


def test_default_error_target_added_once():
    ts = with_default_error_target(parse_targets(["ttft<1s"]))
    assert [t.name for t in ts] == ["ttft_p95", "error_rate"]
    ts = with_default_error_target(parse_targets(["error_rate<5%"]))
    assert len(ts) == 1 and ts[0].threshold == pytest.approx(0.05)
