"""The trial's GPUs during a window: which other processes were on them, and how busy they kept them.

Reads an NVML the monitor has opened for its window (kvtune.nvml is the only NVML code):
at each sample the compute processes on the trial's GPUs and the per-process utilisation
samples the driver took since the previous query. A process is "other" when it belongs to
neither the server's tree nor kvtune's; its memory is the most it held in the window and its
SM share the mean of its samples (samples the driver never took for it count as idle, since
the driver samples only processes that ran).
"""

from __future__ import annotations

from typing import Callable

from kvtune import nvml as nvml_mod
from kvtune.interference.observed import GpuOther


class GpuWatch:
    def __init__(self, nv: nvml_mod.Nvml, gpus: frozenset[int]):
        self.nv, self.gpus = nv, gpus
        self._since_us = 0
        self._samples_supported = True
        self._memory: dict[tuple[int, int], int | None] = {}  # (gpu, pid) -> most bytes held
        self._names: dict[tuple[int, int], str | None] = {}
        self._sm: dict[tuple[int, int], list[int]] = {}
        self._queries = 0

    def sample(self, ours: Callable[[int], bool], name_of: Callable[[int], str | None]) -> None:
        for p in nvml_mod.running_processes(self.nv, self.gpus):
            if ours(p.pid):
                continue
            key = (p.gpu, p.pid)
            held = self._memory.get(key)
            self._memory[key] = p.used_bytes if held is None else max(held, p.used_bytes or 0)
            self._names[key] = self._names.get(key) or name_of(p.pid)
        self._queries += 1
        if not self._samples_supported:
            return
        samples = nvml_mod.process_utilisation(self.nv, self.gpus, self._since_us)
        if samples is None:
            self._samples_supported = False
            return
        for s in samples:
            self._since_us = max(self._since_us, s.timestamp_us)
            if not ours(s.pid):
                key = (s.gpu, s.pid)
                self._sm.setdefault(key, []).append(s.sm_pct)
                self._names[key] = self._names.get(key) or name_of(s.pid)

    def others(self) -> tuple[GpuOther, ...]:
        """The other processes seen, busiest first. Their SM share averages over the samples
        taken in the window (at most one per query per process)."""
        keys = set(self._memory) | set(self._sm)
        out = []
        for key in keys:
            sm = None
            if self._samples_supported:
                values = self._sm.get(key, [])
                sm = sum(values) / max(len(values), self._queries, 1)
            out.append(GpuOther(key[0], key[1], self._names.get(key), self._memory.get(key), sm))
        return tuple(sorted(out, key=lambda g: (-(g.sm_pct or 0.0), -(g.used_bytes or 0), g.gpu, g.pid)))
