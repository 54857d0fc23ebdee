"""The honest budget (durations: tests/unit/test_durations.py): what counts against --trials, the asks cap, the time budget."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.tuner.budget import Budget, StopReason, confirmation_reserve_s, first_look_launches


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


def test_the_time_budget_keeps_the_verdicts_first_look_for_the_confirmation():
    """--time-budget is the whole run's: the search stops once what is left would not hold the
    verdict's first look (3 leaders screened + 3 pairs = 9 launches at the search's mean)."""
    launches = first_look_launches(confirm_top=3, confirm_pairs=9)
    assert launches == 9
    assert first_look_launches(confirm_top=1, confirm_pairs=9) == 6  # one leader: no screening
    assert first_look_launches(confirm_top=0, confirm_pairs=9) == 0  # no confirmation: nothing kept
    assert first_look_launches(confirm_top=2, confirm_pairs=2) == 2 + 4
    reserve = confirmation_reserve_s(search_s=600.0, search_launches=10, launches=launches)
    assert reserve == 540.0  # 60 s a launch
    assert confirmation_reserve_s(0.0, 0, launches) == 0.0  # nothing timed yet: nothing to go by
    b = Budget(trials=40, time_budget_s=3600)
    assert b.stop_reason(measured=10, asked=10, elapsed_s=3000, reserve_s=reserve) is None
    assert b.stop_reason(measured=10, asked=10, elapsed_s=3060, reserve_s=reserve) is StopReason.TIME
    assert b.explain(StopReason.TIME, 10, 10, 3060, reserve) == (
        "time budget of 1h: the search stopped after 51m, keeping about 9m for the confirmation: "
        "measured 10 of 40 trials"
    )
    # a budget already spent says so, whatever was to be kept
    assert b.explain(StopReason.TIME, 10, 10, 3700, reserve).startswith("time budget of 1h spent after 1h1m40s")
