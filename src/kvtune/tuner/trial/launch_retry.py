"""Starting a trial's server: a transient failure is retried once, a verdict is final.

A failed start says something about the config only when the config caused it: an argument the
server refused, memory it could not get at load, a crash its log explains. A port another process
took, a start-up that timed out (a busy host is slow), or a failed start while the previous
server's memory was still held say nothing about it. Those are transient: the server is started
once more, on a fresh port, as a fresh process; if that fails too, the trial is infeasible with
its kind and `TrialOutcome.transient` set, and a later proposal of the same config is measured
again instead of copied (`TrialRecords.find_measured`). Before every start, the memory wait
(`memory_wait.py`) lets the previous server's memory come back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kvtune import hardware
from kvtune.kinds import FailureKind
from kvtune.launchers.base import Launcher
from kvtune.launchers.process import ServerProcess, ServerStartError, free_port
from kvtune.launchers.startup import StartupLimits
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.trial.memory_wait import MemoryWait, MemoryWaitResult

MAX_ATTEMPTS = 2  # the first start and one retry
NOTE_WAIT_S = 1.0  # a memory wait at least this long is reported as a phase


class LaunchFailed(Exception):
    """The server never became ready: `kind` and `reason` for the outcome; `transient` when
    the failure said nothing about the config (it was retried once and failed again)."""

    def __init__(self, kind: FailureKind, reason: str, transient: bool):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.transient = transient


def is_transient(error: ServerStartError, memory: MemoryWaitResult) -> bool:
    """A port clash or a start-up timeout (the error says so), or a server that exited while
    the previous server's memory was still held."""
    return error.transient or (bool(memory.held) and error.kind is FailureKind.START_FAILED)


@dataclass
class Starter:
    """Starts one server for `outcome` and waits until it is ready (or gives up by `limits`: its
    log stalled, or the cap passed); `new_server` builds the (unstarted) process for the
    outcome's argv, a port and a log file."""

    launcher: Launcher
    host: str
    limits: StartupLimits
    memory: MemoryWait
    new_server: Callable[[TrialOutcome, int, Path], ServerProcess]
    on_phase: Callable[[str], None] = lambda p: None
    fresh_port: Callable[[str], int] = free_port
    waited_s: float = field(default=0.0, init=False)  # in the memory wait, over every attempt

    def start(self, outcome: TrialOutcome, port: int, trial_dir: Path) -> ServerProcess:
        """A ready server (the caller stops it), with `outcome`'s argv, log path, `launched`
        and start-up time set for the start that worked. Raises LaunchFailed."""
        first = ""
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                port = self.fresh_port(self.host)
                outcome.argv = self.launcher.command(outcome.candidate, port, self.host)
            log = trial_dir / ("server.log" if attempt == 0 else f"server.retry{attempt}.log")
            outcome.log_path = str(log)
            memory = self.memory.before_launch()
            self.waited_s += memory.waited_s
            if memory.held:
                self.on_phase(f"{memory.describe()}; starting anyway")
            elif memory.waited_s >= NOTE_WAIT_S:
                self.on_phase(f"waited for the previous server's memory: {memory.describe()}")
            server = self.new_server(outcome, port, log)
            try:
                server.start()
                outcome.launched = True
                outcome.startup_s = server.wait_ready(self.limits)
                split = self.launcher.startup_split(server.log_text())
                outcome.startup_split = {"total": round(outcome.startup_s, 3), **split}
                return server
            except ServerStartError as e:
                server.stop()
                reason = f"{e.kind.label}: {self._why(e, server, memory)}"
                transient = is_transient(e, memory)
                if transient and attempt + 1 < MAX_ATTEMPTS:
                    self.on_phase(f"{reason}; transient: retrying once on a fresh port")
                    first = reason
                    continue
                if first:
                    reason += f"; {'transient, ' if transient else ''}failed on a retry too (first start: {first})"
                elif transient:
                    reason += "; transient"
                raise LaunchFailed(e.kind, reason, transient) from e
            except BaseException:
                server.stop()
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _why(self, e: ServerStartError, server: ServerProcess, memory: MemoryWaitResult) -> str:
        """The error's reason; for an exit, the backend's reading of its own log (the server is
        stopped by then); the host's load for a timeout and the held memory for an exit."""
        why = e.reason
        if e.kind is FailureKind.START_FAILED and e.returncode is not None:
            why = (
                f"exited with status {e.returncode}: {self.launcher.classify_failure(e.returncode, server.log_text())}"
            )
        if e.kind is FailureKind.START_TIMEOUT:
            load = hardware.load_average()
            if load is not None:
                why += f" (host load {load:.1f} on {hardware.cpu_count()} CPUs)"
        if e.kind is FailureKind.START_FAILED and memory.held:
            why += f" ({memory.describe()})"
        return why
