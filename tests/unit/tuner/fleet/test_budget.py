"""The honest budget: durations, what counts against --trials, the asks cap, the time budget."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.tuner.fleet.budget import Budget, StopReason, format_duration, parse_duration


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("2h", 7200.0),
        ("90m", 5400.0),
        ("45s", 45.0),
        ("1h30m", 5400.0),
        ("1h30m15s", 5415.0),
        ("1.5h", 5400.0),
        ("1d", 86400.0),
        ("3600", 3600.0),
        (" 2H ", 7200.0),
        ("1h 30m", 5400.0),
        (7200, 7200.0),
        (0.5, 0.5),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("abc", "not a duration"),
        ("0", "more than zero"),
        ("0h", "more than zero"),
        ("-1h", "negative"),
        ("-5", "negative"),
        ("", "not a duration"),
        ("1x", "not a duration"),
        ("30m1h", "not a duration"),
        ("h", "not a duration"),
        (0, "more than zero"),
        (-3, "more than zero"),
        (True, "not a duration"),
        (float("inf"), "more than zero"),
    ],
)
def test_bad_durations_give_one_line_naming_the_fix(text, fragment):
    with pytest.raises(SpecError) as e:
        parse_duration(text)
    msg = str(e.value)
    assert fragment in msg and "--time-budget" in msg and "1h30m" in msg and "\n" not in msg


def test_parse_duration_names_the_setting():
    with pytest.raises(SpecError, match="^time_budget 'x'"):
        parse_duration("x", what="time_budget")


@pytest.mark.parametrize("seconds,text", [(5400, "1h30m"), (45, "45s"), (7200, "2h"), (0, "0s"), (3661.4, "1h1m1s")])
def test_format_duration_round_trips(seconds, text):
    assert format_duration(seconds) == text
    if seconds:
        assert parse_duration(text) == round(seconds)


def test_asks_cap_default_and_override():
    assert Budget(3).cap == 50
    assert Budget(5).cap == 50
    assert Budget(6).cap == 60
    assert Budget(10, asks_cap=12).cap == 12


def test_only_measured_configs_spend_trials():
    b = Budget(trials=4)
    # 3 measured, 30 asks (27 pre-screened or duplicates): one trial still to ask
    assert b.stop_reason(measured=3, asked=30, elapsed_s=0) is None
    assert b.stop_reason(measured=4, asked=30, elapsed_s=0) is StopReason.TRIALS
    # with another worker running the last one, nobody asks a fifth
    assert b.stop_reason(measured=3, asked=30, elapsed_s=0, in_flight=1) is StopReason.TRIALS
    assert b.remaining_trials(1, in_flight=1) == 2
    assert b.remaining_trials(5) == 0


def test_asks_cap_ends_an_almost_impossible_space():
    b = Budget(trials=4)
    assert b.stop_reason(measured=1, asked=49, elapsed_s=0) is None
    assert b.stop_reason(measured=1, asked=50, elapsed_s=0) is StopReason.ASKS
    msg = b.explain(StopReason.ASKS, measured=1, asked=50, elapsed_s=0)
    assert "asked 50 configs" in msg and "only 1 of 4" in msg and "almost all impossible" in msg
    assert "max(50, 10 x trials)" in msg
    assert "max(" not in Budget(4, asks_cap=8).explain(StopReason.ASKS, 1, 8, 0)


def test_time_budget_stops_asking_and_trials_win_a_tie():
    b = Budget(trials=10, time_budget_s=7200)
    assert b.stop_reason(measured=3, asked=3, elapsed_s=7199.9) is None
    assert b.stop_reason(measured=3, asked=3, elapsed_s=7200) is StopReason.TIME
    assert b.stop_reason(measured=10, asked=10, elapsed_s=9000) is StopReason.TRIALS
    assert b.explain(StopReason.TIME, 3, 3, 7260) == ("time budget of 2h spent after 2h1m: measured 3 of 10 trials")
    assert b.explain(StopReason.TRIALS, 10, 12, 100) == "measured 10 of 10 trials"


def test_time_budget_ends_a_study_with_many_trials_left():
    b = Budget(trials=1000, time_budget_s=60)
    assert b.stop_reason(measured=5, asked=5, elapsed_s=61) is StopReason.TIME


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        (dict(trials=0), "--trials 0"),
        (dict(trials=2, time_budget_s=0), "--time-budget"),
        (dict(trials=2, time_budget_s=-1.0), "--time-budget"),
        (dict(trials=5, asks_cap=4), "asks cap"),
    ],
)
def test_invalid_budget(kwargs, fragment):
    with pytest.raises(SpecError, match=fragment.replace("-", r"\-")):
        Budget(**kwargs)
