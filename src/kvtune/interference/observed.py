"""What a monitored window saw: the `Interference` record and the thresholds that judge it.

The thresholds, and why:

- Foreign CPU: ``max(FOREIGN_CORES_MIN, FOREIGN_SHARE_OF_CPUS * cpus)`` cores on average over
  the window, counted on the CPUs kvtune may run on. On the 2-4 core machines the demo runs on,
  a quarter of a core is 6-12% of the machine, far above what a quiet Linux host spends outside
  the measurement (sshd, journald, timers: a few hundredths of a core) and well below what
  changed the issue's figures (one busy loop = one core, which moved the demo baseline 3x). On a
  large host the background of agents grows with the machine, and one foreign core is a smaller
  share of it, so the bar rises to 5% of the CPUs (3.2 cores of 64).
- Steal: ``STEAL_SHARE`` (5%) of the CPUs' time given by the hypervisor to another guest; a
  VM's usual steal is well under 1%, and 5% of lost time is already the size of the
  differences kvtune ranks configs by.
- Memory pressure: ``MEMORY_PRESSURE_SHARE`` (10%) of the window with some task stalled on
  memory (PSI ``some``): reclaim or thrashing, which makes any figure measured in it
  unrepresentative whoever caused it.
- CPU pressure (PSI ``some``) is recorded but is no criterion: on a small machine a server
  with as many threads as cores plus kvtune's load client contend with each other, so CPU
  pressure would mark a config's own effect as interference (every `threads=N` config on a
  2-core box would be "disturbed").
- GPU: another process (not the server's, not kvtune's) on the trial's GPUs using more than
  ``GPU_FOREIGN_SM_PCT`` (10%) of their streaming multiprocessors on average. A foreign process
  that only holds memory is listed but does not disturb throughput (the pre-screen already sizes
  against free memory); one whose pid this namespace cannot see (NVML reports host pids inside
  containers) may be the server itself, so it is listed as unattributed and never flags.
- A window shorter than ``MIN_WINDOW_S`` (1 s) is recorded but never judged disturbed: the kernel
  counts CPU time in ticks of 10 ms, so in a window of a few tens of milliseconds (a benchmark run
  on a test's virtual clock, a run cut at once by the early stop) one stray tick is already a
  foreign core or more.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

FOREIGN_CORES_MIN = 0.25
FOREIGN_SHARE_OF_CPUS = 0.05
STEAL_SHARE = 0.05
MEMORY_PRESSURE_SHARE = 0.10
GPU_FOREIGN_SM_PCT = 10.0
MIN_WINDOW_S = 1.0


def foreign_cores_threshold(cpus: int) -> float:
    """Cores of foreign CPU time, on average over a window, above which it is disturbed."""
    return max(FOREIGN_CORES_MIN, FOREIGN_SHARE_OF_CPUS * max(1, cpus))


@dataclass(frozen=True)
class Consumer:
    """A process outside the server and kvtune, with its CPU share over the window (100 = one
    core busy the whole window)."""

    pid: int
    name: str
    cpu_pct: float

    def describe(self) -> str:
        return f"pid {self.pid} ({self.name}) {self.cpu_pct:.0f}% CPU"


@dataclass(frozen=True)
class GpuOther:
    """Another process on the trial's GPUs: the most memory it held during the window and its
    average SM utilisation (None when the driver gave no per-process samples). `name` is None
    for a pid this namespace cannot see (then it may even be the server: never a criterion)."""

    gpu: int
    pid: int
    name: str | None
    used_bytes: int | None
    sm_pct: float | None

    def describe(self) -> str:
        parts = [f"pid {self.pid} ({self.name or 'not visible here'}) on GPU {self.gpu}"]
        if self.used_bytes is not None:
            parts.append(f"{self.used_bytes / 2**30:.1f} GiB")
        if self.sm_pct is not None:
            parts.append(f"{self.sm_pct:.0f}% SM")
        return ", ".join(parts)


@dataclass(frozen=True)
class Interference:
    """One window's interference. Shares are fractions (0.05 = 5%); cores are cores-worth of CPU
    time on average (`foreign_cores_peak`: the busiest sampling interval). A figure the machine
    could not give (no PSI, no /proc/stat) is None. `disturbed` applies the module's thresholds:
    `crossed` lists each bar a figure crossed, `reason` says it in one line with the top
    consumers (or why the window counts as quiet)."""

    seconds: float
    cpus: int
    foreign_cores: float | None
    foreign_cores_peak: float | None
    server_cores: float | None
    own_cores: float | None
    steal_share: float | None
    cpu_pressure: float | None
    memory_pressure: float | None
    top: tuple[Consumer, ...] = ()
    gpu_others: tuple[GpuOther, ...] = ()
    disturbed: bool = False
    crossed: tuple[str, ...] = ()
    reason: str = ""

    def to_dict(self) -> dict:
        """JSON-ready (what the tuner stores beside a measurement's figures)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Interference":
        """Back from `to_dict` (as `kvtune show` and the report read a stored trial)."""
        return cls(
            **{
                **d,
                "top": tuple(Consumer(**c) for c in d.get("top", ())),
                "gpu_others": tuple(GpuOther(**g) for g in d.get("gpu_others", ())),
                "crossed": tuple(d.get("crossed", ())),
            }
        )


def judge(
    cpus: int,
    foreign_cores: float | None,
    steal: float | None,
    memory_pressure: float | None,
    gpu_others: tuple[GpuOther, ...],
) -> list[str]:
    """Every threshold the window crossed, as text for people; empty when it was quiet."""
    crossed = []
    bar = foreign_cores_threshold(cpus)
    if foreign_cores is not None and foreign_cores > bar:
        crossed.append(f"foreign CPU {foreign_cores:.2f} cores on average (threshold {bar:.2f} on {cpus} CPUs)")
    if steal is not None and steal > STEAL_SHARE:
        crossed.append(f"steal {steal:.1%} (threshold {STEAL_SHARE:.0%})")
    if memory_pressure is not None and memory_pressure > MEMORY_PRESSURE_SHARE:
        crossed.append(f"memory pressure {memory_pressure:.1%} (threshold {MEMORY_PRESSURE_SHARE:.0%})")
    for g in gpu_others:
        if g.name is not None and g.sm_pct is not None and g.sm_pct > GPU_FOREIGN_SM_PCT:
            crossed.append(f"{g.describe()} (threshold {GPU_FOREIGN_SM_PCT:.0f}% SM)")
    return crossed


def quiet_reason(cpus: int, foreign_cores: float | None, steal: float | None, seconds: float | None = None) -> str:
    if seconds is not None and seconds < MIN_WINDOW_S:
        return f"not judged: a {seconds:.2f} s window is too short to tell (minimum {MIN_WINDOW_S:g} s)"
    foreign = "not measurable" if foreign_cores is None else f"{foreign_cores:.2f} cores"
    text = f"quiet: foreign CPU {foreign} (threshold {foreign_cores_threshold(cpus):.2f} on {cpus} CPUs)"
    return text + ("" if steal is None else f", steal {steal:.1%}")


class Watch(Protocol):
    """What watches a window: `Monitor`, or a test's fake (no /proc, no timing)."""

    def start(self) -> None: ...
    def stop(self) -> Interference | None: ...  # None: nothing was watched
