"""The interference monitor: during a measurement, how much of the machine was someone else's.

Foreign CPU is what ran on kvtune's CPUs that was neither the server's process tree nor
kvtune's own: the busy ticks of those CPUs (/proc/stat) less the ticks of the two trees
(/proc/[pid]/stat deltas). Taking the CPUs' total rather than summing the other processes
counts what a per-process scan misses: processes that start and exit between two samples (a
compiler's many short jobs) and processes of other containers sharing the cores, which this
PID namespace cannot see. The visible foreign processes are still scanned, to name the top
consumers. Beside it: steal (/proc/stat), CPU and memory pressure stall shares (/proc/pressure,
where the kernel has PSI), and on the trial's GPUs the other processes and their utilisation
(NVML, through kvtune.nvml). The thresholds and their reasons are in `record`.

Everything is read through `proc_root` and timed with `clock`, and sampling is driven by a
`Ticker` (a thread in production, by hand in tests), so a test builds a fake /proc in a folder,
moves a fake clock and calls `sample()` itself.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from kvtune import hardware
from kvtune import nvml as nvml_mod
from kvtune.energy import ThreadTicker, Ticker
from kvtune.interference import procfs
from kvtune.interference.gpu import GpuWatch
from kvtune.interference.observed import MIN_WINDOW_S, Consumer, Interference, judge, quiet_reason

SAMPLE_INTERVAL_S = 0.5
TOP_CONSUMERS = 5
Pids = Callable[[], Iterable[int]]


# Set by `kvtune run --workers N` on the workers it starts: the pid of the process that started
# them. Its tree (the other workers, their servers and load) is the same study, not interference.
FAMILY_ENV = "KVTUNE_FAMILY_PID"


def this_process() -> tuple[int, ...]:
    """kvtune's own tree by default: this process (its children come with it) and, in a worker
    started by `kvtune run --workers N`, the process that started it (`FAMILY_ENV`)."""
    family = os.environ.get(FAMILY_ENV, "")
    return (os.getpid(), int(family)) if family.isdigit() else (os.getpid(),)


def no_server() -> tuple[int, ...]:
    return ()


@dataclass
class _Window:
    """Sums over the sampled intervals of one window (ticks, except pressure in microseconds)."""

    foreign: int = 0
    server: int = 0
    own: int = 0
    cpu: procfs.CpuTicks = field(default_factory=procfs.CpuTicks)
    cpu_seen: bool = False
    peak_cores: float = 0.0
    by_process: dict[tuple[int, int], int] = field(default_factory=dict)  # (pid, start) -> ticks
    names: dict[tuple[int, int], str] = field(default_factory=dict)


class Monitor:
    """Samples one window: `start()`, then `sample()` every `interval_s` (the ticker does it),
    then `stop()` -> `Interference`. `own_pids` and `server_pids` return the roots of kvtune's
    and the server's trees (a root's descendants and process group count with it); they are
    called at every sample, so a server started after `start()` is still recognised. `gpus`:
    the trial's GPU indices to watch (None: none, a CPU-only trial). `cpus`: the CPUs kvtune may
    run on (default: this process's affinity)."""

    def __init__(
        self,
        proc_root: Path = Path("/proc"),
        clock: Callable[[], float] = time.monotonic,
        own_pids: Pids = this_process,
        server_pids: Pids = no_server,
        gpus: Iterable[int] | None = None,
        nvml: nvml_mod.Nvml | None = None,
        cpus: Iterable[int] | None = None,
        ticks_per_s: int | None = None,
        ticker: Ticker | None = None,
        interval_s: float = SAMPLE_INTERVAL_S,
    ):
        self.proc_root = proc_root
        self.clock = clock
        self.own_pids, self.server_pids = own_pids, server_pids
        self.gpus = None if gpus is None else frozenset(gpus)
        self.nvml = nvml
        self.cpus = tuple(hardware.cpu_ids() if cpus is None else cpus)
        self.ticks_per_s = ticks_per_s or os.sysconf("SC_CLK_TCK")
        self.ticker = ticker if ticker is not None else ThreadTicker()
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stack: ExitStack | None = None
        self._gpu: GpuWatch | None = None

    def start(self) -> None:
        with self._lock:
            self._window = _Window()
            self._t0 = self._last_t = self.clock()
            self._procs = procfs.processes(self.proc_root)
            self._cpu = procfs.cpu_ticks(self.proc_root, self.cpus)
            self._psi0 = {r: procfs.pressure_total_us(self.proc_root, r) for r in ("cpu", "memory")}
            self._gpu = None
            if self.gpus is not None:
                self._stack = ExitStack()
                nv = self._stack.enter_context(nvml_mod.opened(self.nvml))
                self._gpu = None if nv is None else GpuWatch(nv, self.gpus)
        self.ticker.start(self.sample, self.interval_s)

    def sample(self) -> None:
        """One interval: what ran since the previous sample, and by whom."""
        with self._lock:
            now, procs = self.clock(), procfs.processes(self.proc_root)
            cpu = procfs.cpu_ticks(self.proc_root, self.cpus)
            server = procfs.trees(procs, self.server_pids())
            own = procfs.trees(procs, self.own_pids()) - server
            self._account(now, procs, cpu, server, own)
            if self._gpu is not None:
                self._gpu.sample(
                    lambda pid: pid in server or pid in own, lambda pid: procs[pid].name if pid in procs else None
                )
            self._procs, self._cpu, self._last_t = procs, cpu, now

    def _account(
        self,
        now: float,
        procs: dict[int, procfs.ProcStat],
        cpu: procfs.CpuTicks | None,
        server: set[int],
        own: set[int],
    ) -> None:
        w = self._window
        ticks = {"server": 0, "own": 0, "foreign": 0}
        for pid, stat in procs.items():
            before = self._procs.get(pid)
            same = before is not None and before.start_ticks == stat.start_ticks
            delta = max(0, stat.cpu_ticks - before.cpu_ticks) if same else stat.cpu_ticks  # type: ignore[union-attr]
            kind = "server" if pid in server else "own" if pid in own else "foreign"
            ticks[kind] += delta
            if kind == "foreign" and delta:
                key = (pid, stat.start_ticks)
                w.by_process[key] = w.by_process.get(key, 0) + delta
                w.names[key] = stat.name
        w.server += ticks["server"]
        w.own += ticks["own"]
        foreign = ticks["foreign"]
        if cpu is not None and self._cpu is not None:
            d = cpu - self._cpu
            w.cpu = procfs.CpuTicks(w.cpu.busy + d.busy, w.cpu.steal + d.steal, w.cpu.total + d.total)
            w.cpu_seen = True
            foreign = max(0, d.busy - ticks["server"] - ticks["own"])
        w.foreign += foreign
        if now > self._last_t:
            w.peak_cores = max(w.peak_cores, foreign / self.ticks_per_s / (now - self._last_t))

    def stop(self) -> Interference:
        """The last interval, then the record. Stops the ticker and releases NVML."""
        self.ticker.stop()
        self.sample()
        with self._lock:
            gpu_others = self._gpu.others() if self._gpu is not None else ()
            if self._stack is not None:
                self._stack.close()
                self._stack = None
            return self._record(self.clock() - self._t0, gpu_others)

    def _record(self, seconds: float, gpu_others: tuple) -> Interference:
        w, tps = self._window, self.ticks_per_s

        def cores(ticks: int) -> float | None:
            return ticks / tps / seconds if seconds > 0 else None

        steal = w.cpu.steal / w.cpu.total if w.cpu_seen and w.cpu.total > 0 else None
        psi = {}
        for resource, before in self._psi0.items():
            after = procfs.pressure_total_us(self.proc_root, resource)
            psi[resource] = (
                None if before is None or after is None or seconds <= 0 else max(0.0, (after - before) / 1e6 / seconds)
            )
        foreign = cores(w.foreign)
        top = sorted(((k, t) for k, t in w.by_process.items()), key=lambda kt: -kt[1])[:TOP_CONSUMERS]
        consumers = tuple(Consumer(k[0], w.names[k], 100.0 * (cores(t) or 0.0)) for k, t in top)
        crossed = judge(len(self.cpus), foreign, steal, psi["memory"], gpu_others) if seconds >= MIN_WINDOW_S else []
        if crossed:
            named = "; ".join(c.describe() for c in consumers[:3])
            reason = "disturbed: " + "; ".join(crossed) + (f" (top: {named})" if named else "")
        else:
            reason = quiet_reason(len(self.cpus), foreign, steal, seconds)
        return Interference(
            seconds=seconds,
            cpus=len(self.cpus),
            foreign_cores=foreign,
            foreign_cores_peak=w.peak_cores if seconds > 0 else None,
            server_cores=cores(w.server),
            own_cores=cores(w.own),
            steal_share=steal,
            cpu_pressure=psi["cpu"],
            memory_pressure=psi["memory"],
            top=consumers,
            gpu_others=gpu_others,
            disturbed=bool(crossed),
            crossed=tuple(crossed),
            reason=reason,
        )
