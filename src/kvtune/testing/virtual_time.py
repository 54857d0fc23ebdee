"""Virtual time for tests: a clock that only moves when everything waits, as trio's MockClock
with autojump.

`VirtualClock.run(coro)` runs a coroutine on an asyncio event loop whose `time()` is the virtual
clock and whose selector never blocks: whenever no task is ready to run and a timer is pending,
the clock jumps straight to that timer. A fake server that sleeps 200 ms before its first token
(``await clock.asleep(0.2)``) is then measured at exactly 200 ms by a client reading
``clock.monotonic()``, however loaded the machine is, and the test takes no wall time.

Synchronous code on the same clock (`sleep`) moves the time forward at once: a blocking
handler that "works" for 20 ms costs exactly 20 ms of virtual time, without a real wait.

Only code that waits on this clock (asyncio timers inside `run`, `sleep`, `asleep`) is virtual.
Real I/O still works (a ready socket is served before the clock jumps), but a real wait (a
thread, a subprocess) is not sped up: when every task waits and no timer is due the loop blocks
for real up to `idle_limit_s`, then raises `VirtualTimeStall` instead of hanging the test.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

# How long a loop with no timer and nothing ready waits for real I/O before calling it a stall.
IDLE_LIMIT_S = 10.0


class VirtualTimeStall(RuntimeError):
    """Every task waits, no timer is due and no I/O came: the code under test can never go on."""


class VirtualClock:
    """A monotonic clock that starts at `start` and moves only by `sleep`, `advance` or the
    event loop of `run` jumping to its next timer. Implements kvtune.clock.Clock."""

    def __init__(self, start: float = 0.0, idle_limit_s: float = IDLE_LIMIT_S, epoch: float = 1.7e9) -> None:
        self.now = float(start)
        self.idle_limit_s = idle_limit_s
        self.epoch = epoch  # the wall time at monotonic 0
        self._loop: VirtualEventLoop | None = None

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.epoch + self.now

    def advance(self, seconds: float) -> None:
        """Move the time forward (never back)."""
        self.now += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        """A blocking wait, or blocking work, of `seconds`: the time moves on at once."""
        self.advance(seconds)

    async def asleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            raise RuntimeError("VirtualClock.asleep outside VirtualClock.run: the wait would be real")
        await asyncio.sleep(max(0.0, seconds))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` to completion on a fresh virtual-time event loop (as ``asyncio.run``; spelled
        out because ``asyncio.Runner`` and its `loop_factory` need Python 3.11)."""
        loop = VirtualEventLoop(self)
        try:
            return loop.run_until_complete(coro)
        finally:
            try:
                _cancel_left_tasks(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()


def _cancel_left_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks `coro` left running and let them finish, as ``asyncio.run`` does."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


class _JumpingSelector(selectors.DefaultSelector):
    """Polls for real I/O without blocking; when none is ready, moves the clock by the loop's
    timeout (the gap to its next timer) instead of sleeping it."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled: only real I/O or another thread can go on
            ready = super().select(self._clock.idle_limit_s)
            if not ready:
                raise VirtualTimeStall(f"every task waits and no timer is due (virtual time {self._clock.now:.6f} s)")
            return ready
        self._clock.advance(timeout)
        return []


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An event loop whose time is `clock` and which jumps to its next timer when idle."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(selector=_JumpingSelector(clock))
        self._virtual_clock = clock
        clock._loop = self

    def time(self) -> float:
        return self._virtual_clock.now
