import math

import pytest

from kvtune.errors import TargetError
from kvtune.objectives.targets import MAX_MARGIN, parse_target, parse_targets, with_default_error_target


@pytest.mark.parametrize(
    "text,key,op,threshold",
    [
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
    ],
)
def test_valid_targets(text, key, op, threshold):
    t = parse_target(text)
    assert (t.key, t.op) == (key, op)
    assert t.threshold == pytest.approx(threshold)


def test_bare_metric_means_p95():
    assert parse_target("ttft<1s").stat == "p95"
    assert "p95" in parse_target("tpot<50ms").describe()


@pytest.mark.parametrize(
    "text,fragment",
    [
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
    ],
)
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


@pytest.mark.parametrize(
    "text,key",
    [
        ("ttft<1s", "ttft_p95<1000ms"),
        ("TTFT_P99 <= 800 ms", "ttft_p99<=800ms"),
        ("error_rate<1%", "error_rate<1%"),
        ("error_rate<=0.05", "error_rate<=5%"),
        ("output_throughput>50", "output_throughput>50"),
        ("request_throughput>=2.5req/s", "request_throughput>=2.5"),
    ],
)
def test_constraint_key_is_the_whole_target_and_parses_back(text, key):
    t = parse_target(text)
    assert t.constraint_key == key
    again = parse_target(key)
    assert (again.metric, again.stat, again.op) == (t.metric, t.stat, t.op)
    assert again.threshold == pytest.approx(t.threshold) and again.constraint_key == key


def test_two_targets_on_one_metric_keep_two_keys():
    floor, ceiling = parse_targets(["output_throughput>50", "output_throughput<500"])
    assert floor.constraint_key != ceiling.constraint_key
    a, b = parse_targets(["error_rate<5%", "error_rate<=0.01"])
    assert {a.constraint_key, b.constraint_key} == {"error_rate<5%", "error_rate<=1%"}


@pytest.mark.parametrize(
    "texts",
    [
        ["ttft<1s", "ttft<1s"],
        ["ttft<1s", "ttft_p95 < 1000ms"],  # the same target, written twice
        ["error_rate<1%", "error_rate<0.01"],
    ],
)
def test_the_same_target_twice_is_an_error(texts):
    with pytest.raises(TargetError, match="given twice") as e:
        parse_targets(texts)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
