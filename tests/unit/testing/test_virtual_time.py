"""Virtual time: the clock moves only when every task waits, straight to the next timer."""

from __future__ import annotations

import asyncio

import pytest

from kvtune.testing.virtual_time import VirtualClock, VirtualTimeStall


def test_timers_fire_at_their_virtual_time_in_order() -> None:
    clock = VirtualClock(start=100.0)
    fired: list[tuple[str, float]] = []

    async def after(name: str, seconds: float) -> None:
        await clock.asleep(seconds)
        fired.append((name, clock.monotonic()))

    async def main() -> None:
        await asyncio.gather(after("slow", 3600.0), after("fast", 0.2), after("mid", 1.5))

    clock.run(main())
    assert [name for name, _ in fired] == ["fast", "mid", "slow"]
    assert [t for _, t in fired] == pytest.approx([100.2, 101.5, 3700.0], abs=1e-9)
    assert clock.monotonic() == pytest.approx(3700.0, abs=1e-9)


def test_a_timeout_elapses_on_the_virtual_clock() -> None:
    clock = VirtualClock()

    async def main() -> None:
        await asyncio.wait_for(asyncio.Event().wait(), 2.5)

    with pytest.raises(asyncio.TimeoutError):
        clock.run(main())
    assert clock.monotonic() == pytest.approx(2.5, abs=1e-12)


def test_blocking_work_costs_its_time_at_once() -> None:
    clock = VirtualClock()
    clock.sleep(0.02)
    clock.advance(-5)  # never backwards
    assert clock.monotonic() == 0.02


def test_asleep_outside_its_loop_is_refused() -> None:
    clock = VirtualClock()
    with pytest.raises(RuntimeError, match="outside VirtualClock.run"):
        asyncio.run(clock.asleep(1.0))


def test_a_loop_that_can_never_go_on_is_a_stall_not_a_hang() -> None:
    clock = VirtualClock(idle_limit_s=0.05)

    async def main() -> None:
        await asyncio.Event().wait()  # nothing will ever set it, and no timer is due

    with pytest.raises(VirtualTimeStall, match="no timer is due"):
        clock.run(main())
