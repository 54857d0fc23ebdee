"""Before a launch, wait (bounded) until the previous server's memory is back.

A server that was just stopped may not have handed all its memory back yet: the GPU driver frees
a context a moment after the process exits, a forked worker may still be exiting. A server
launched into that memory fails at load, and that failure says nothing about its config. So
before each launch the tuner compares what is free now with what was free just before the
previous server started (the RAM a new server may take, and each GPU's free memory where NVML
reports it) and waits until it is back within a tolerance, for at most `MEMORY_WAIT_S`. It stops
sooner when the shortfall has not shrunk for `SETTLE_S` (memory another process took, which is
not coming back: another worker's server, say), and it never sleeps when memory is already back.
When a GPU's memory is still short it names the processes NVML lists on that GPU (pid, memory,
name from /proc), so the reason of a launch that fails into that memory says who holds it. The
reader, the process lister, the clock and the sleep are injected, so tests run without waiting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from kvtune import hardware
from kvtune.hardware import GpuHolder, visible_gpus

__all__ = ["MemorySnapshot", "MemoryWait", "MemoryWaitResult", "read_memory", "shortfall", "visible_gpus"]

MEMORY_WAIT_S = 30.0
"""The longest a launch waits for the previous server's memory. A stopped server's memory is
normally back in well under a second; 30 s covers a GPU driver tearing down a large context
without making a study of 50 trials on a host whose memory someone else took 25 minutes longer."""

SETTLE_S = 5.0
"""Stop waiting when the shortfall has not shrunk for this long: what is missing is not being
released (another process holds it), so waiting the whole bound would only lose time."""

POLL_S = 0.25  # between two readings while memory is still coming back

RAM_TOLERANCE_BYTES = 512 * 2**20
RAM_TOLERANCE_FRACTION = 0.05
"""RAM counts as back within the larger of 512 MiB and 5% of the figure before the previous
server: page cache and other processes move MemAvailable by that much on their own."""

GPU_TOLERANCE_BYTES = 256 * 2**20
GPU_TOLERANCE_FRACTION = 0.02
"""A GPU's memory counts as back within the larger of 256 MiB and 2% of its free memory before."""

PROGRESS_BYTES = 64 * 2**20  # a shortfall smaller by this much is memory still coming back


@dataclass(frozen=True)
class MemorySnapshot:
    """What a new server could take now: RAM (`hardware.available_memory_bytes`) and each
    GPU's free memory by index (empty without NVML)."""

    ram_available: int
    gpu_free: Mapping[int, int] = field(default_factory=dict)


def read_memory(gpus: frozenset[int] | None = None, nvml: hardware.Nvml | None = None) -> MemorySnapshot:
    """The host's memory now; `gpus` keeps only those GPU indices (a worker's slot); `nvml`
    injects an NVML reader (recorded answers in tests)."""
    free = hardware.gpu_free_bytes(nvml)
    return MemorySnapshot(
        hardware.available_memory_bytes(), {i: b for i, b in free.items() if gpus is None or i in gpus}
    )


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def gpu_shortfall(before: MemorySnapshot, now: MemorySnapshot) -> dict[int, int]:
    """Bytes still missing per GPU index: only GPUs short by more than their tolerance."""
    out: dict[int, int] = {}
    for i, free in before.gpu_free.items():
        if i in now.gpu_free:
            short = free - now.gpu_free[i]
            if short > max(GPU_TOLERANCE_BYTES, GPU_TOLERANCE_FRACTION * free):
                out[i] = short
    return out


def shortfall(before: MemorySnapshot, now: MemorySnapshot) -> dict[str, int]:
    """What is still missing, in bytes, per place ("RAM", "GPU 0", ...): only places short by
    more than their tolerance."""
    out: dict[str, int] = {}
    ram_short = before.ram_available - now.ram_available
    if ram_short > max(RAM_TOLERANCE_BYTES, RAM_TOLERANCE_FRACTION * before.ram_available):
        out["RAM"] = ram_short
    out.update({f"GPU {i}": short for i, short in gpu_shortfall(before, now).items()})
    return out


@dataclass(frozen=True)
class MemoryWaitResult:
    """How a wait ended: `held` is empty when memory is back (or there was nothing to compare)."""

    waited_s: float = 0.0
    held: Mapping[str, int] = field(default_factory=dict)
    settled: bool = False  # gave up early: the shortfall had stopped shrinking
    holders: tuple[GpuHolder, ...] = ()  # processes NVML lists on the GPUs still short

    def describe(self) -> str:
        """One line for people: what is still held, by whom, and how long the launch waited."""
        if not self.held:
            return f"memory back after {self.waited_s:.1f} s"
        what = ", ".join(f"{place} {_gib(n)}" for place, n in self.held.items())
        why = "not being released" if self.settled else "not released yet"
        who = f"; held by {', '.join(h.describe() for h in self.holders)}" if self.holders else ""
        return f"memory still held after {self.waited_s:.1f} s ({why}): {what} short of before the previous server{who}"


@dataclass
class MemoryWait:
    """Remembers the memory before each launch and, before the next, waits until it is back."""

    read: Callable[[], MemorySnapshot] = read_memory
    holders: Callable[[Iterable[int]], list[GpuHolder]] = hardware.gpu_holders
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    bound_s: float = MEMORY_WAIT_S
    settle_s: float = SETTLE_S
    before: MemorySnapshot | None = None  # just before the previous server started

    def before_launch(self) -> MemoryWaitResult:
        """Wait (bounded) until the previous server's memory is back, then remember the memory
        now as this launch's "before". Reads once and returns at once when nothing is held."""
        t0 = self.clock()
        now = self.read()
        result = MemoryWaitResult()
        if self.before is not None:
            held = shortfall(self.before, now)
            least, progress_t = sum(held.values()), t0
            while held:
                t = self.clock()
                if t - t0 >= self.bound_s or t - progress_t >= self.settle_s:
                    short_gpus = sorted(gpu_shortfall(self.before, now))
                    result = MemoryWaitResult(
                        t - t0,
                        held,
                        settled=t - t0 < self.bound_s,
                        holders=tuple(self.holders(short_gpus)) if short_gpus else (),
                    )
                    break
                self.sleep(POLL_S)
                now = self.read()
                held = shortfall(self.before, now)
                if sum(held.values()) < least - PROGRESS_BYTES:
                    least, progress_t = sum(held.values()), self.clock()
            else:
                result = MemoryWaitResult(self.clock() - t0)
        # When memory did not come back, the next launch compares with what is free now: one
        # bounded wait per lost gigabyte, not one per trial.
        self.before = now
        return result
