"""The exact early-stop rule: it stops on the very request after which a target cannot hold,
never one request earlier, and agrees with `metrics.summarize_requests` + `Target.met` on every run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtune.objectives.early_stop import EarlyStop, provable
from kvtune.objectives.metrics import RequestSample, summarize_requests
from kvtune.objectives.targets import Target, parse_target


def ok(ttft: float = 0.0, e2el: float | None = None, tokens: int = 2) -> RequestSample:
    e2el = ttft if e2el is None else e2el
    return RequestSample(
        send_time=0.0,
        ok=True,
        ttft_s=ttft,
        e2el_s=e2el,
        output_tokens=tokens,
        itl_s=[(e2el - ttft) / (tokens - 1)] * (tokens - 1) if tokens > 1 else [],
    )


def failed() -> RequestSample:
    return RequestSample(send_time=0.0, ok=False, error="boom")


def stops_after(target: str, samples: list[RequestSample], planned: int) -> int | None:
    """The 1-based request on which the rule stopped, or None."""
    es = EarlyStop([parse_target(target)], planned)
    for i, s in enumerate(samples, 1):
        if es.observe(s):
            return i
    return None


# Over 32 planned requests, bad requests arriving first (the rest would be 0-latency successes).
# Just over the threshold, interpolation towards a 0 keeps the percentile under it one request
# longer than failures (+inf) do.
@pytest.mark.parametrize(
    "stat,near,inf", [("p50", 17, 16), ("p90", 5, 4), ("p95", 3, 2), ("p99", 2, 1), ("median", 17, 16)]
)
def test_percentile_boundary(stat, near, inf):
    target = f"ttft_{stat}<10s"
    assert stops_after(target, [ok(10.5)] * (near - 1), 32) is None
    assert stops_after(target, [ok(10.5)] * near, 32) == near
    assert stops_after(target, [failed()] * (inf - 1), 32) is None
    assert stops_after(target, [failed()] * inf, 32) == inf


def test_strict_and_inclusive_bounds_differ_at_equality():
    assert stops_after("e2el_p95<=10s", [ok(0, 10.0)] * 3, 32) is None
    assert stops_after("e2el_p95<10s", [ok(0, 10.0)] * 3, 32) == 3


def test_reason_reads_like_the_issue():
    es = EarlyStop([parse_target("ttft<10s")], 32)
    for s in [ok(1.0)] * 6 + [ok(18.0)] * 2:
        assert es.observe(s) is None
    stop = es.observe(ok(18.0))
    assert stop is not None and stop.observed == 9 and stop.target.key == "p95_ttft_ms"
    assert es.verdict() == ("stopped after 9 of 32 requests: 3 over TTFT 10 s, p95<10s can no longer hold")
    assert es.observe(ok(0.0)) is stop  # once stopped, it stays stopped


def test_observed_values_near_the_threshold_tip_the_percentile():
    # 2 over 10 s alone cannot break p95 over 32, but with 30 finished requests at 9.9 s the
    # interpolation between 9.9 s and 10.5 s already lands over it (counting alone would miss it).
    samples = [ok(9.9)] * 30 + [ok(10.5)] * 2
    assert stops_after("ttft<10s", samples, 32) == 32
    assert not parse_target("ttft<10s").met(summarize_requests(samples, 1.0))


def test_mean_boundary():
    assert stops_after("ttft_mean<=10s", [ok(40.0)], 4) is None
    assert stops_after("ttft_mean<=10s", [ok(40.001)], 4) == 1
    assert stops_after("ttft_mean<10s", [ok(40.0)], 4) == 1


def test_failed_requests_leave_the_mean_but_shrink_what_can_dilute_it():
    assert stops_after("ttft_mean<=10s", [failed(), ok(30.0)], 4) is None
    assert stops_after("ttft_mean<=10s", [failed(), ok(30.001)], 4) == 2
    # every request failed: no mean at all, and the summary misses the target too
    assert stops_after("ttft_mean<=10s", [failed()] * 4, 4) == 4


@pytest.mark.parametrize(
    "target,planned,allowed",
    [
        ("error_rate<=1%", 100, 1),
        ("error_rate<1%", 100, 0),
        ("error_rate<5%", 32, 1),
        ("error_rate<=0.5", 4, 2),
    ],
)
def test_error_rate_boundary(target, planned, allowed):
    assert stops_after(target, [failed()] * allowed, planned) is None
    assert stops_after(target, [failed()] * (allowed + 1), planned) == allowed + 1
    es = EarlyStop([parse_target(target)], planned)
    for s in [failed()] * (allowed + 1):
        es.observe(s)
    assert f"{allowed + 1} failed" in es.verdict()


def test_one_token_answers_add_no_tpot():
    # a 1-token answer has no TPOT: it does not count as a 0 that could dilute a slow one
    assert stops_after("tpot_p50<10ms", [ok(0.1, 0.1, tokens=1)], 2) is None
    assert stops_after("tpot_p50<10ms", [ok(0.1, 0.1, tokens=1), ok(0.0, 0.02, 2)], 2) == 2


@pytest.mark.parametrize(
    "target",
    ["ttft>1s", "output_throughput>10", "request_throughput<5", "itl_p95<1ms", "itl_mean<1ms", "tpot_mean>=1s"],
)
def test_what_cannot_be_proven_never_stops(target):
    t = parse_target(target)
    assert not provable(t)
    es = EarlyStop([t], 4)
    assert es.watched == ()
    for s in [failed()] * 4:
        assert es.observe(s) is None
    assert es.verdict() is None


def test_the_lost_target_is_named_not_the_first_listed():
    es = EarlyStop([parse_target("error_rate<50%"), parse_target("ttft<1s"), parse_target("output_throughput>1")], 4)
    assert [t.key for t in es.watched] == ["error_rate", "p95_ttft_ms"]
    # one failure of 4: error rate 25% can still hold, but a +inf TTFT breaks p95 over 4
    stop = es.observe(failed())
    assert stop is not None and stop.target.key == "p95_ttft_ms"
    assert "1 over TTFT 1 s (1 failed, first: boom)" in stop.reason  # why it failed, too


def test_more_requests_than_planned_is_a_bug():
    es = EarlyStop([parse_target("ttft<1s")], 1)
    es.observe(ok())
    with pytest.raises(ValueError, match="planned"):
        es.observe(ok())
    with pytest.raises(ValueError):
        EarlyStop([], 0)


# ---- property: stop <=> the best completion misses; agrees with summarize_requests + Target.met ----

TIMES = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 10.0])


@st.composite
def samples(draw) -> RequestSample:
    if draw(st.integers(0, 9)) == 0:
        return failed()
    ttft = draw(TIMES)
    gen = draw(TIMES)
    tokens = draw(st.sampled_from([1, 2, 3, 5]))
    return ok(ttft, ttft + gen, tokens)


@st.composite
def targets(draw) -> Target:
    metric = draw(st.sampled_from(["ttft", "tpot", "e2el", "error_rate"]))
    op = draw(st.sampled_from(["<", "<="]))
    if metric == "error_rate":  # error_rate<0% can never hold: parse_target refuses it
        return parse_target(f"error_rate{op}{draw(st.sampled_from([0 if op == '<=' else 1, 3, 5, 10, 25, 50, 100]))}%")
    stat = draw(st.sampled_from(["mean", "median", "p50", "p90", "p95", "p99"]))
    thr = draw(st.sampled_from([1, 250, 500, 1000, 1500, 2000, 3000]))  # no latency is 0 or below
    return parse_target(f"{metric}_{stat}{op}{thr}ms")


ZERO = ok(0.0, 0.0, tokens=2)  # the best any remaining request can do


def met(target: Target, run: list[RequestSample]) -> bool:
    return target.met(summarize_requests(run, 1.0))


@settings(max_examples=600, deadline=None)
@given(target=targets(), run=st.lists(samples(), min_size=1, max_size=40), data=st.data())
def test_stops_exactly_when_no_completion_can_meet_the_target(target, run, data):
    planned = len(run)
    cut = data.draw(st.integers(0, planned), label="prefix")
    es = EarlyStop([target], planned)
    for s in run[:cut]:
        es.observe(s)
    best = run[:cut] + [ZERO] * (planned - cut)
    stopped = es.stop is not None
    # never stops while the best completion would still meet it; always stops once it cannot
    assert stopped == (not met(target, best))
    if stopped:
        assert not met(target, run)  # the real completion misses it as well
        assert not met(target, run[:cut])  # and so does the partial summary that gets recorded
        assert str(es.stop.observed) in es.verdict()
    # after all planned requests: stopped <=> the target is missed
    for s in run[cut:]:
        es.observe(s)
    assert (es.stop is not None) == (not met(target, run))
