"""Durations as people write them and back (durations.py): ``2h``, ``90m``, ``1h30m``, a bare
number of seconds; one-line errors naming the setting and how to write it; `format_duration`
printing what `parse_duration` reads. (Moved from tests/unit/tuner/fleet/test_budget.py.)"""

from __future__ import annotations

import pytest

from kvtune.durations import format_duration, parse_duration
from kvtune.errors import SpecError


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


def test_format_duration_rounds_to_whole_seconds_and_never_goes_negative():
    assert format_duration(59.6) == "1m" and format_duration(-5) == "0s" and format_duration(86400) == "24h"


@pytest.mark.parametrize("text,seconds", [("500ms", 0.5), ("0", 0.0), ("0s", 0.0), ("2s", 2.0), (0, 0.0)])
def test_a_pause_may_be_zero_or_in_milliseconds(text, seconds):
    assert parse_duration(text, what="--think-time", zero_ok=True) == seconds


def test_zero_is_still_refused_where_a_pause_is_not_meant():
    with pytest.raises(SpecError, match="must be more than zero"):
        parse_duration("0", what="--time-budget")
    with pytest.raises(SpecError, match="--think-time '-1' is negative"):
        parse_duration("-1", what="--think-time", zero_ok=True)
    with pytest.raises(SpecError, match="must be zero or more"):
        parse_duration(-1.0, what="--think-time", zero_ok=True)
