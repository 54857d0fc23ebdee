"""A launch's stopwatch (tuner/trial/phase_clock.py) on a virtual clock: exact seconds."""

from __future__ import annotations

from kvtune.testing.virtual_time import VirtualClock
from kvtune.tuner.trial.phase_clock import PhaseClock


def test_phases_take_the_time_between_their_entries_and_the_bench_messages_switch_them():
    clock = VirtualClock()
    timer = PhaseClock(clock)
    timer.enter("startup")
    clock.advance(30)
    timer.heard("warmup")
    clock.advance(2)
    timer.heard("measuring")
    clock.advance(10)
    timer.heard("load 4: targets hold")  # another phase message: no switch
    clock.advance(1)
    timer.enter("teardown")
    clock.advance(0.5)
    timer.enter(None)
    clock.advance(100)  # nobody's time
    t = timer.record(cache_hit=False)
    assert (t.startup_s, t.warmup_s, t.measurement_s, t.teardown_s, t.total_s) == (30, 2, 11, 0.5, 43.5)
    assert t.cache_hit is False


def test_a_wait_inside_a_phase_moves_to_waits_never_more_than_the_phase_held():
    clock = VirtualClock()
    timer = PhaseClock(clock)
    timer.enter("startup")
    clock.advance(12)
    timer.move(5, "startup")  # the memory wait before the launch
    timer.move(50, "warmup")  # warm-up held nothing yet: nothing moves
    clock.advance(3)
    t = timer.record()
    assert (t.startup_s, t.waits_s, t.warmup_s) == (10, 5, 0)
