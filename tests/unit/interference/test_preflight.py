"""Pre-flight: a window before the baseline, its sleep injected so the fake clock and the fake
/proc move during it; the warning names who is busy, and says nothing on a quiet machine."""

from __future__ import annotations

import pytest

from kvtune.interference import Monitor, preflight, warning
from tests.unit.interference.fakeproc import Clock, FakeProc, ManualTicker

KVTUNE, PIP, CC1 = 500, 800, 801


def _machine(tmp_path, during):
    proc, clock = FakeProc(tmp_path / "proc"), Clock()
    proc.process(KVTUNE, "kvtune", 100)
    proc.process(PIP, "pip", 1000, start=300)
    monitor = Monitor(
        proc_root=proc.root,
        clock=clock,
        own_pids=lambda: (KVTUNE,),
        cpus=(0, 1),
        ticks_per_s=100,
        ticker=ManualTicker(),
    )

    def sleep(seconds: float) -> None:
        during(proc, seconds)
        clock.advance(seconds)

    return monitor, sleep


def test_a_busy_machine_is_named_with_its_top_consumers(tmp_path) -> None:
    def install(proc: FakeProc, seconds: float) -> None:
        proc.process(PIP, "pip", 1000 + int(120 * seconds), start=300)
        proc.process(CC1, "cc1", int(30 * seconds), start=900)
        for _ in range(int(seconds)):
            proc.run_cpus(150 + 60)  # pip, cc1, and 0.6 core of jobs that already exited

    monitor, sleep = _machine(tmp_path, install)
    result = preflight(monitor, seconds=3, sleep=sleep)
    assert result.disturbed
    assert result.seconds == 3
    text = warning(result)
    assert text is not None
    assert text.startswith("This machine is already busy (foreign CPU 2.10 cores on average")
    assert "pid 800 (pip) 120% CPU, pid 801 (cc1) 30% CPU" in text
    assert "About 0.6 cores of it belong to no process visible here" in text
    assert text.count("pid 800") == 1


def test_a_quiet_machine_gives_no_warning(tmp_path) -> None:
    def idle(proc: FakeProc, seconds: float) -> None:
        for _ in range(int(seconds)):
            proc.run_cpus(1)

    monitor, sleep = _machine(tmp_path, idle)
    result = preflight(monitor, seconds=3, sleep=sleep)
    assert not result.disturbed
    assert result.foreign_cores == pytest.approx(0.01)
    assert warning(result) is None
