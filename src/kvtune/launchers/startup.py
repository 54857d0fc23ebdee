"""How long a server may take to start: liveness, not one fixed timeout.

A vLLM start on a GPU loads weights, runs torch.compile and captures CUDA graphs; each trial's
config has its own compile cache key, so most trials compile afresh and a first start can take
many minutes on a large model. A fixed timeout is either too short for that or far too long for a
server that hung at once. So a start fails when the server's log stops making progress for
`StartupLimits.stall_s` (any new output counts: loading, compiling, capturing, a progress bar's
update), or at the generous cap `cap_s`, whichever comes first. Health is polled as before
(`process.ServerProcess.wait_ready`); this module only says when to give up and why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kvtune.clock import Clock

# Seconds without new log output before a start counts as stalled. Sized for GPUs: vLLM logs
# nothing while Inductor compiles a large model's graphs, or while FlashInfer builds its kernels
# the first time, and either can run for minutes; a progress bar (weights, graph capture) writes
# output as it goes. A false stall costs a failed trial and its retry, a hung server only this.
DEFAULT_STALL_S = 300.0
# The most seconds any start may take, progress or not (`startup_timeout_s`).
DEFAULT_CAP_S = 1800.0


@dataclass(frozen=True)
class StartupLimits:
    """When a start that is not healthy yet gives up: no new log output for `stall_s` seconds,
    or `cap_s` seconds after the launch (None: that limit is off)."""

    stall_s: float | None = DEFAULT_STALL_S
    cap_s: float = DEFAULT_CAP_S


DEFAULT_LIMITS = StartupLimits()


class LogProgress:
    """Watches a server's log grow: when it last grew (on the injected clock) and its last line.

    Growth is read from the file's size, so a progress bar that rewrites its line with a carriage
    return counts as progress, and reading costs one stat per health poll."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self.path = path
        self.clock = clock
        self.size = self._size()
        self.grew_at = clock.monotonic()

    def _size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except OSError:
            return 0

    def silent_s(self) -> float:
        """Seconds since the log last grew (since the watch began when it never did)."""
        size = self._size()
        if size != self.size:
            self.size, self.grew_at = size, self.clock.monotonic()
        return self.clock.monotonic() - self.grew_at


def last_log_line(log_text: str) -> str:
    """The log's last non-empty line (a progress bar's latest state included), shortened."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def give_up_reason(limits: StartupLimits, elapsed_s: float, silent_s: float, read_log: Callable[[], str]) -> str | None:
    """Why a start that is not healthy after `elapsed_s` (its log silent for `silent_s`) gives
    up now, as the failure's reason; None while it may go on. The log is read only to name its
    last line, once it gives up."""
    if limits.stall_s is not None and silent_s > limits.stall_s:
        return (
            f"stalled: no new log output for {limits.stall_s:.0f} s (startup_stall_s) after "
            f'"{last_log_line(read_log())}", {elapsed_s:.0f} s after the launch'
        )
    if elapsed_s > limits.cap_s:
        return (
            f"not healthy after {limits.cap_s:.0f} s, the start-up cap (startup_timeout_s); its log last "
            f'grew {silent_s:.0f} s ago: "{last_log_line(read_log())}"'
        )
    return None
