"""The pure parts of benchmarks/noise.py: the A/A spread, the seeded hog plan, the hog's coverage
of a window, and the detection / false-alarm shares (the real run needs llama-server and a quiet
machine: the lead runs it)."""

from __future__ import annotations

import sys

import pytest

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import noise  # noqa: E402


def test_spread_of_repeated_measurements() -> None:
    s = noise.spread([10.0, 12.0, 14.0])
    assert s["mean"] == pytest.approx(12.0)
    assert s["sd"] == pytest.approx(2.0)
    assert s["cv"] == pytest.approx(2.0 / 12.0)
    assert s["min_max_ratio"] == pytest.approx(10.0 / 14.0)
    with pytest.raises(ValueError):
        noise.spread([10.0])


def test_the_plan_is_seeded_half_hogged_and_starts_hogs_in_the_first_half() -> None:
    a, b = noise.plan(21, seed=7), noise.plan(21, seed=7)
    assert a == b
    assert sum(p.hog for p in a) == 11
    assert all(0.0 <= p.offset_fraction <= noise.HOG_COVERAGE for p in a if p.hog)
    assert all(p.offset_fraction == 0.0 for p in a if not p.hog)
    assert [p.hog for p in noise.plan(21, seed=8)] != [p.hog for p in a]
    with pytest.raises(ValueError):
        noise.plan(1, seed=1)


@pytest.mark.parametrize(
    "hog_start, share", [(None, 0.0), (10.0, 1.0), (5.0, 1.0), (12.0, 0.8), (15.0, 0.5), (20.0, 0.0), (25.0, 0.0)]
)
def test_coverage_is_the_share_of_the_window_the_hog_ran_in(hog_start, share) -> None:
    assert noise.coverage(10.0, 20.0, hog_start) == pytest.approx(share)


def _o(hog: bool, cov: float, flagged: bool) -> noise.Outcome:
    return noise.Outcome(hog, cov, flagged, None, None, "")


def test_rates_count_disturbed_and_quiet_apart_and_leave_late_hogs_out() -> None:
    outcomes = (
        [_o(True, 0.9, True)] * 19
        + [_o(True, 0.6, False)]
        + [_o(False, 0.0, False)] * 19
        + [_o(False, 0.0, True)]
        + [_o(True, 0.1, True)]
    )
    r = noise.rates(outcomes)
    assert (r["disturbed"], r["quiet"], r["partial"]) == (20, 20, 1)
    assert r["detection_rate"] == pytest.approx(0.95)
    assert r["false_alarm_rate"] == pytest.approx(0.05)
    lines = noise.verdict_lines(r)
    assert lines[0].startswith("detected: 19/20 disturbed measurements flagged = 95% (goal >= 95%: met)")
    assert "false alarms: 1/20 quiet measurements flagged = 5% (goal <= 5%: met)" in lines[1]
    assert "1 with a late hog" in lines[1]


def test_goals_missed_say_so_and_an_empty_class_is_not_a_rate() -> None:
    r = noise.rates([_o(True, 0.8, False), _o(True, 0.8, True)])
    assert r["false_alarm_rate"] is None
    lines = noise.verdict_lines(r)
    assert "= 50% (goal >= 95%: NOT met)" in lines[0]
    assert "= n/a" in lines[1]


def test_the_pooled_noise_printed_beside_the_a_a_spread_is_kvtunes_own() -> None:
    import math

    pooled = noise.pooled_noise([100.0, 110.0])
    assert pooled is not None and pooled["dof"] == 1
    assert pooled["rel_sd"] == pytest.approx(math.log(1.1) / math.sqrt(2), abs=1e-4)  # SD of ln(value)
    assert noise.pooled_noise([100.0]) is None
