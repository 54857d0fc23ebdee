"""Measuring until the machine was quiet: a measurement taken while something else used the
machine is re-measured, and one that stays disturbed says so.

The interference monitor (kvtune.interference) watches every measured run of a trial
(`phase_window.WatchedBench`). When the worst window of a measurement crossed a threshold (see
kvtune.interference.observed), its figures describe the machine's other load as much as the config:
they are dropped, the runner waits for the machine to quieten (watching it in short windows, the
server idle) and measures again on the same server, up to `ATTEMPTS` measurements in all. The
last measurement's figures are kept either way; when it too was disturbed, the outcome's
`disturbed` is true and naming and the noise pool pass it over (study/naming.py, study/measured_noise.py).
Each step is a phase message, so a person watching sees why a trial takes longer.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from kvtune.interference import Interference, Monitor, Watch, preflight

ATTEMPTS = 3  # measurements of one launch in all: the first and up to 2 re-measurements
QUIET_WINDOW_S = 2.0  # one look at the machine between attempts
QUIET_LOOKS = 5  # at most this many looks (10 s) before measuring again anyway

Pids = Callable[[], Iterable[int]]
# (the server's root pids, the trial's GPU indices or None) -> a monitor for one trial's windows
MonitorFactory = Callable[[Pids, "frozenset[int] | None"], Watch]


def watch_machine(server_pids: Pids, gpus: frozenset[int] | None) -> Watch:
    """The production monitor: kvtune's own tree (this process and its children) and the
    server's are not foreign; the trial's GPUs are watched when it is pinned to some."""
    return Monitor(server_pids=server_pids, gpus=gpus)


class Unwatched:
    """No watching: for the fake servers of kvtune's own tests and its test driver, whose figures
    are no performance evidence (a test suite run on a loaded machine would otherwise re-measure
    every trial and wait for a quiet that never comes)."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        return None


def unwatched(server_pids: Pids, gpus: frozenset[int] | None) -> Unwatched:
    """A `MonitorFactory` that watches nothing (see `Unwatched`)."""
    return Unwatched()


class Attempts:
    """One launch's measurements, judged by their windows. `measure()` -> (figures, window) is
    called again while the window is disturbed and attempts are left (`again()`)."""

    def __init__(
        self,
        watch: Watch,
        say: Callable[[str], None],
        sleep: Callable[[float], None] = time.sleep,
        attempts: int = ATTEMPTS,
    ):
        self.watch, self.say, self.sleep, self.attempts = watch, say, sleep, attempts
        self.replaced: list[Interference] = []

    def again(self, window: Interference | None, attempt: int, server_alive: bool) -> bool:
        """After measurement `attempt` (1-based) judged by `window`: measure once more? Says why
        and waits for quiet when so; says the figures stay disturbed when attempts ran out."""
        if window is None or not window.disturbed:
            return False
        if attempt >= self.attempts or not server_alive:
            self.say(
                f"measurement {attempt} of {self.attempts} {window.reason}: still disturbed, "
                "its figures are kept but are no evidence for a verdict"
            )
            return False
        self.replaced.append(window)
        self.say(
            f"measurement {attempt} {window.reason}: dropped; waiting for the machine to quieten, "
            f"then re-measuring on the same server (attempt {attempt + 1} of {self.attempts})"
        )
        self.wait_for_quiet()
        return True

    def wait_for_quiet(self) -> None:
        """Look at the machine in `QUIET_WINDOW_S` windows until one is quiet (at most
        `QUIET_LOOKS` of them), then go on either way."""
        reason = ""
        for _ in range(QUIET_LOOKS):
            window = preflight(self.watch, QUIET_WINDOW_S, self.sleep)
            if window is None or not window.disturbed:
                return
            reason = window.reason
        self.say(
            f"the machine is still busy after {QUIET_LOOKS * QUIET_WINDOW_S:.0f} s ({reason}): re-measuring anyway"
        )
