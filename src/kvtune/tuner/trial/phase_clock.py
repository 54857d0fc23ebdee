"""The stopwatch of one launch: which phase its server's hardware time is in, moment to moment.

The runner enters a phase as the launch moves on (start-up, the benchmark's own "warmup" and
"measuring" phase messages, the fidelity probe, teardown); time spent waiting inside a phase
(the memory wait inside the start-up, a measurement the interference monitor dropped) is moved
to ``waits`` once it is known. Reads the injected clock (kvtune/clock.py), so a test's virtual
clock gives exact seconds. The result is the record study/time_spent.py defines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvtune.clock import REAL_CLOCK, Clock
from kvtune.study.time_spent import PHASES, TimeSpent

# The benchmark's phase messages (bench/client.py `run_benchmark`) and the phase each starts.
BENCH_PHASES = {"warmup": "warmup", "measuring": "measurement"}


@dataclass
class PhaseClock:
    """Seconds by phase of one launch; one phase runs at a time (none before `enter`)."""

    clock: Clock = REAL_CLOCK
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    phase: str | None = None
    _since: float = 0.0

    def enter(self, phase: str | None) -> None:
        """The time from now on is `phase`'s (None: nobody's, e.g. after teardown)."""
        now = self.clock.monotonic()
        if self.phase is not None:
            self.seconds[self.phase] += now - self._since
        self.phase, self._since = phase, now

    def heard(self, message: str) -> str:
        """A benchmark phase message: "warmup" and "measuring" start their phases. Returns the
        message, for whoever shows it next."""
        phase = BENCH_PHASES.get(message)
        if phase is not None:
            self.enter(phase)
        return message

    def move(self, seconds: float, source: str, to: str = "waits") -> None:
        """Count `seconds` that `source` held (at most what it has) as `to`'s instead."""
        self.enter(self.phase)  # the running phase's time so far is counted first
        moved = max(0.0, min(seconds, self.seconds[source]))
        self.seconds[source] -= moved
        self.seconds[to] += moved

    def dropped(self, since: dict[str, float]) -> None:
        """The warm-up and measurement since the `snapshot` `since` were dropped (a disturbed
        measurement, taken again): count them as waits, and warm up again from now."""
        now = self.snapshot()
        for phase in ("warmup", "measurement"):
            self.move(now[phase] - since[phase], phase)
        self.enter("warmup")

    def snapshot(self) -> dict[str, float]:
        """The seconds so far by phase (the running one included)."""
        self.enter(self.phase)
        return dict(self.seconds)

    def record(self, cache_hit: bool | None = None) -> TimeSpent:
        """The launch's record (the running phase's time so far included)."""
        s = self.snapshot()
        seconds: dict[str, Any] = {f"{p}_s": s[p] for p in PHASES}
        return TimeSpent(**seconds, cache_hit=cache_hit)
