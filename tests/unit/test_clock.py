"""The real clock: what every timing reads unless a test injects a virtual one."""

from __future__ import annotations

import asyncio

from kvtune.bench.options import BenchOptions
from kvtune.clock import REAL_CLOCK, RealClock
from kvtune.launchers.process import ServerProcess


def test_the_real_clock_is_every_default() -> None:
    assert isinstance(REAL_CLOCK, RealClock)
    assert BenchOptions("m").clock is REAL_CLOCK
    assert ServerProcess(argv=["x"], env={}, log_path=None, port=1).clock is REAL_CLOCK  # type: ignore[arg-type]


def test_the_real_clock_runs_coroutines_and_never_waits_negative_time() -> None:
    assert REAL_CLOCK.run(asyncio.sleep(0, result=7)) == 7
    t0 = REAL_CLOCK.monotonic()
    REAL_CLOCK.sleep(-1.0)  # a negative wait is no wait, not an error
    assert REAL_CLOCK.run(REAL_CLOCK.asleep(-1.0)) is None
    assert REAL_CLOCK.monotonic() >= t0  # monotonic
