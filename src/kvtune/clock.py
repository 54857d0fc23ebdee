"""The one clock that timing code reads and waits on: real by default, virtual in tests.

Latency figures (TTFT, ITL, a start-up's seconds to ready) are differences of `monotonic()`
readings, and every wait that code does between them goes through the same clock (`sleep` in
synchronous code, `asleep` in the benchmark's event loop, `run` to start that loop); the
timestamps records carry (a re-measurement's "at", a budget's elapsed time) are its `wall()`. Injecting a
virtual clock (kvtune.testing.virtual_time) then makes a fake server's 200 ms TTFT measure exactly
200 ms and a 120 s start-up timeout pass at once, whatever the machine's load: the tests check
definitions, not the scheduler. memory_wait.py and energy.py take ``clock.monotonic`` and
``clock.sleep`` as their plain callables.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Coroutine, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """Seconds on a monotonic clock, and the ways to wait on it."""

    def monotonic(self) -> float:
        """Seconds since an arbitrary origin; only differences mean anything."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch: when something happened, for records and people
        (never for durations: the wall clock can step)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for `seconds`."""
        ...

    async def asleep(self, seconds: float) -> None:
        """Wait `seconds` inside the running event loop (other tasks go on)."""
        ...

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` to completion on an event loop that keeps this clock's time."""
        ...


class RealClock:
    """The machine's clock: `time.perf_counter` (monotonic, the finest resolution), `time.sleep`,
    `asyncio.sleep` and `asyncio.run`. Durations only, so perf_counter and the event loop's
    `time.monotonic` never need to agree on an origin."""

    def monotonic(self) -> float:
        return time.perf_counter()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run(coro)


REAL_CLOCK: Clock = RealClock()
