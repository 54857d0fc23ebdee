"""Measuring until the machine was quiet (tuner/trial/disturbance.py): `Attempts` decides whether a
measurement is taken again, says why, and waits for quiet in bounded looks. Fake watches answer
scripted windows and the sleep only records: no /proc, no clock, no real waiting. (The runner
dropping and re-taking a measurement is tests/integration/tuner/trial/test_disturbed.py.)"""

from __future__ import annotations

from kvtune.interference import Interference, Monitor
from kvtune.tuner.trial.disturbance import (
    ATTEMPTS,
    QUIET_LOOKS,
    QUIET_WINDOW_S,
    Attempts,
    Unwatched,
    unwatched,
    watch_machine,
)


def window(disturbed: bool, reason: str = "") -> Interference:
    return Interference(
        seconds=QUIET_WINDOW_S,
        cpus=4,
        foreign_cores=1.5 if disturbed else 0.0,
        foreign_cores_peak=None,
        server_cores=None,
        own_cores=None,
        steal_share=None,
        cpu_pressure=None,
        memory_pressure=None,
        disturbed=disturbed,
        reason=reason or ("foreign CPU 1.5 cores" if disturbed else "quiet"),
    )


BUSY, QUIET = window(True), window(False)


class ScriptedWatch:
    """Each start/stop pair answers the next scripted window (the last one forever)."""

    def __init__(self, *windows: Interference | None):
        self.windows = list(windows)
        self.started = self.stopped = 0

    def start(self) -> None:
        self.started += 1

    def stop(self) -> Interference | None:
        self.stopped += 1
        return self.windows.pop(0) if len(self.windows) > 1 else self.windows[0]


def attempts(watch: ScriptedWatch) -> tuple[Attempts, list[str], list[float]]:
    said: list[str] = []
    slept: list[float] = []
    return Attempts(watch, said.append, slept.append), said, slept


def test_a_quiet_or_unwatched_measurement_is_not_taken_again():
    a, said, slept = attempts(ScriptedWatch(QUIET))
    assert not a.again(QUIET, 1, server_alive=True)
    assert not a.again(None, 1, server_alive=True)
    assert said == [] and slept == [] and a.replaced == []


def test_a_disturbed_measurement_is_dropped_and_taken_again_once_the_machine_is_quiet():
    watch = ScriptedWatch(BUSY, QUIET)
    a, said, slept = attempts(watch)
    assert a.again(BUSY, 1, server_alive=True)
    assert a.replaced == [BUSY]
    assert said[0] == (
        "measurement 1 foreign CPU 1.5 cores: dropped; waiting for the machine to quieten, "
        f"then re-measuring on the same server (attempt 2 of {ATTEMPTS})"
    )
    assert slept == [QUIET_WINDOW_S, QUIET_WINDOW_S] and watch.started == watch.stopped == 2
    assert len(said) == 1  # quiet came: nothing more to say


def test_the_last_attempt_keeps_its_figures_and_says_they_stay_disturbed():
    a, said, slept = attempts(ScriptedWatch(QUIET))
    assert not a.again(BUSY, ATTEMPTS, server_alive=True)
    assert said == [
        f"measurement {ATTEMPTS} of {ATTEMPTS} foreign CPU 1.5 cores: still disturbed, "
        "its figures are kept but are no evidence for a verdict"
    ]
    assert slept == [] and a.replaced == []


def test_a_dead_server_is_not_measured_again():
    a, said, _ = attempts(ScriptedWatch(QUIET))
    assert not a.again(BUSY, 1, server_alive=False)
    assert "still disturbed" in said[0] and a.replaced == []


def test_the_wait_for_quiet_is_bounded_and_then_measures_anyway():
    busy = window(True, "CPU pressure 40%")
    watch = ScriptedWatch(busy)
    a, said, slept = attempts(watch)
    a.wait_for_quiet()
    assert slept == [QUIET_WINDOW_S] * QUIET_LOOKS and watch.started == QUIET_LOOKS
    assert said == [
        f"the machine is still busy after {QUIET_LOOKS * QUIET_WINDOW_S:.0f} s (CPU pressure 40%): re-measuring anyway"
    ]


def test_a_watch_that_sees_nothing_counts_as_quiet():
    a, said, slept = attempts(ScriptedWatch(None))
    a.wait_for_quiet()
    assert slept == [QUIET_WINDOW_S] and said == []


def test_a_custom_attempt_count_bounds_the_re_measurements():
    said: list[str] = []
    a = Attempts(ScriptedWatch(QUIET), said.append, lambda s: None, attempts=1)
    assert not a.again(BUSY, 1, server_alive=True) and "of 1" in said[0]


def test_unwatched_watches_nothing():
    u = unwatched(lambda: [123], None)
    assert isinstance(u, Unwatched)
    u.start()
    assert u.stop() is None


def test_the_production_monitor_watches_the_servers_pids_and_the_trials_gpus():
    def pids() -> list[int]:
        return [42]

    m = watch_machine(pids, frozenset({1, 3}))
    assert isinstance(m, Monitor) and m.server_pids is pids and m.gpus == frozenset({1, 3})
