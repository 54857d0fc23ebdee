"""Every fact about the host in one place: CPUs, cgroup limits, memory and GPUs.

The fingerprint is stored with every study and written into the launch script's header, so a
result is never read without knowing what it was measured on, and a study refuses trials from
different hardware. Everything that reads /proc, /sys or NVML lives here (NVML through
`kvtune.nvml`, injectable as recorded answers); the planner gets these facts as plain data and
only adds what NVML cannot say (spec-sheet bandwidths). Nothing here raises for a missing file
or driver: a fact that cannot be read is absent.
"""

from __future__ import annotations

import os
import platform
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from kvtune import nvml as nvml_reader
from kvtune.nvml import GpuPair, GpuProcess, Interconnect, Nvml, NvmlReport
from kvtune.planner.gpus import (
    CpuRam,
    GpuInfo,
    HardwareBudget,
    bandwidth_for,
    hardware_budget,
    nvlink_bandwidth_for,
    pcie_bandwidth,
)

CGROUP = Path("/sys/fs/cgroup")
PROC = Path("/proc")
# A GPU with more than this share of its memory taken before kvtune starts anything is noted.
BUSY_GPU_FRACTION = 0.10


def cpu_ids() -> tuple[int, ...]:
    """The CPUs this process may run on (affinity-aware: containers and cpusets are honored)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:
        return tuple(range(os.cpu_count() or 1))


def cpu_count() -> int:
    return len(cpu_ids())


def load_average() -> float | None:
    """The host's 1-minute load average (runnable processes), None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def cpu_flags() -> set[str]:
    """The CPU's feature flags (avx2, avx512f, amx_tile, ...) from /proc/cpuinfo; empty if unreadable."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    m = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(m.group(1).split()) if m else set()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _meminfo(path: str, prefix: str = "") -> dict[str, int]:
    """A meminfo-style file as bytes per field (node files prefix each line with "Node N ")."""
    out: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line[len(prefix) :].split() if line.startswith(prefix) else []
                if len(parts) >= 2 and parts[1].isdigit():
                    out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    except OSError:
        pass
    return out


def memory_bytes() -> int:
    """Total RAM (MemTotal), or 0 when /proc/meminfo is unreadable."""
    return _meminfo("/proc/meminfo").get("MemTotal", 0)


def cgroup_memory_headroom(cgroup: Path = CGROUP) -> int | None:
    """Bytes this cgroup may still allocate (memory.max - memory.current), None without a limit."""
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        usage = int((cgroup / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return int(limit) - usage if limit.isdigit() else None


def cgroup_cpu_quota(cgroup: Path = CGROUP) -> float | None:
    """CPUs' worth of time this cgroup may use (cgroup v2 cpu.max "200000 100000" -> 2.0; v1
    cpu.cfs_quota_us / cpu.cfs_period_us), None without a quota. A quota below the CPU set's
    size throttles a server that runs a thread per CPU."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        q, per = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    return round(q / per, 2) if q > 0 and per > 0 else None


def available_memory_bytes() -> int:
    """Memory a new server may still take: the least of MemAvailable, NUMA node 0's available
    memory as vLLM's CPU worker computes it (free + file pages + reclaimable) and the cgroup's
    headroom. The node figure matters: vLLM refuses a CPU KV cache larger than it, even when
    /proc says more."""
    figures = []
    total = _meminfo("/proc/meminfo")
    if "MemAvailable" in total:
        figures.append(total["MemAvailable"])
    node = _meminfo("/sys/devices/system/node/node0/meminfo", "Node 0 ")
    if "MemFree" in node:
        figures.append(sum(node.get(k, 0) for k in ("MemFree", "Active(file)", "Inactive(file)", "SReclaimable")))
    headroom = cgroup_memory_headroom()
    if headroom is not None:
        figures.append(headroom)
    return max(0, min(figures)) if figures else 0


def cpu_ram() -> CpuRam:
    """The RAM a CPU server plans with: total, and what a new server may still take."""
    return CpuRam(cpu_model(), memory_bytes(), available_memory_bytes())


# ---- GPUs ------------------------------------------------------------------------------------


def gpu_report(nvml: Nvml | None = None) -> NvmlReport:
    """The GPUs NVML sees (`nvml` injects a reader, e.g. recorded answers); empty without NVML."""
    return nvml_reader.read(nvml) or NvmlReport()


def gpu_free_bytes(nvml: Nvml | None = None) -> dict[int, int]:
    """Free memory per GPU index as NVML reports it now; empty without NVML (the launch's memory
    wait compares it with the figure before the previous server started)."""
    return {g.index: g.memory_free_bytes for g in gpu_report(nvml).gpus}


def cuda_visible_devices(env: Mapping[str, str]) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as its entries (indices or GPU UUIDs, as given; None: unset). The one
    place it is parsed: the worker slots, the launchers, the exports read it through here."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [p.strip() for p in str(value).split(",") if p.strip()]


def visible_gpus(env: Mapping[str, str]) -> frozenset[int] | None:
    """The GPU indices a server's CUDA_VISIBLE_DEVICES names (None: all, or not plain indices
    such as GPU UUIDs). kvtune's worker slots also set CUDA_DEVICE_ORDER=PCI_BUS_ID, so CUDA's
    index i is NVML's index i."""
    parts = cuda_visible_devices(env)
    if parts is None:
        return None
    return frozenset(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


@dataclass(frozen=True)
class GpuHolder:
    """A process holding GPU memory, named for people: NVML's pid and bytes, /proc's name."""

    gpu: int
    pid: int
    used_bytes: int | None
    name: str | None  # /proc/<pid>/comm; None when unreadable (another PID namespace, gone)

    def describe(self) -> str:
        used = "" if self.used_bytes is None else f", {self.used_bytes / 2**30:.1f} GiB"
        return f"pid {self.pid} ({self.name or 'name unknown'}{used}) on GPU {self.gpu}"


def process_name(pid: int, proc: Path = PROC) -> str | None:
    """A process's name (/proc/<pid>/comm), None when unreadable. In a container NVML reports
    the host's pids, which this namespace may not see."""
    try:
        return (proc / str(pid) / "comm").read_text().strip() or None
    except (OSError, ValueError):
        return None


def gpu_holders(
    gpu_indices: Iterable[int] | None = None, nvml: Nvml | None = None, proc: Path = PROC
) -> list[GpuHolder]:
    """Compute processes holding memory on those GPUs (all when None), largest first."""
    wanted = None if gpu_indices is None else frozenset(gpu_indices)
    procs: list[GpuProcess] = nvml_reader.compute_processes(wanted, nvml)
    holders = [GpuHolder(p.gpu, p.pid, p.used_bytes, process_name(p.pid, proc)) for p in procs]
    return sorted(holders, key=lambda h: (-(h.used_bytes or 0), h.gpu, h.pid))


def gpu_infos(report: NvmlReport | None = None) -> list[GpuInfo]:
    """The GPUs as the planner sees them: memory and spec-sheet memory bandwidth."""
    report = gpu_report() if report is None else report
    return [
        GpuInfo(g.index, g.name, g.memory_total_bytes, g.memory_free_bytes, bandwidth_for(g.name)) for g in report.gpus
    ]


@dataclass(frozen=True)
class GpuLink:
    """Two GPUs' connection with its bandwidth (bytes/s, both directions; None if unknown)."""

    a: int
    b: int
    interconnect: Interconnect
    pcie_path: str | None
    bandwidth_bytes_s: float | None


def gpu_links(report: NvmlReport) -> list[GpuLink]:
    """Every GPU pair's link: NVLink at the GPU model's spec-sheet rate, PCIe at the slower of the
    two GPUs' links."""
    gpus = {g.index: g for g in report.gpus}

    def bandwidth(p: GpuPair) -> float | None:
        if p.interconnect == Interconnect.NVLINK:
            return nvlink_bandwidth_for(gpus[p.a].name)
        bws = [pcie_bandwidth(gpus[i].pcie_generation, gpus[i].pcie_width) for i in (p.a, p.b)]
        return min(bws) if all(bws) else None  # type: ignore[type-var]

    return [GpuLink(p.a, p.b, p.interconnect, p.pcie_path, bandwidth(p)) for p in report.pairs]


def accelerator(report: NvmlReport) -> str:
    """'1 x NVIDIA H100 80GB HBM3', '2 x A, 1 x B' for mixed GPUs, 'none (CPU)' without any."""
    if not report.gpus:
        return "none (CPU)"
    counts = Counter(g.name for g in report.gpus)  # insertion order: by first GPU index
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


def _interconnect(links: list[GpuLink]) -> str:
    """'NVLink', 'PCIe (PHB)' or, when only some pairs have NVLink, which ones."""
    nv = [f"{ln.a}-{ln.b}" for ln in links if ln.interconnect == Interconnect.NVLINK]
    if len(nv) == len(links):
        return str(Interconnect.NVLINK)
    paths = sorted({ln.pcie_path for ln in links if ln.pcie_path and ln.interconnect == Interconnect.PCIE})
    pcie = str(Interconnect.PCIE) + (f" ({', '.join(paths)})" if paths else "")
    return f"NVLink {', '.join(nv)}; {pcie} otherwise" if nv else pcie


def _gb_s(bw: float | None) -> float | None:
    return None if bw is None else round(bw / 1e9, 1)


def _gpu_fingerprint(report: NvmlReport) -> dict:
    fp: dict = {
        "accelerator": accelerator(report),
        "gpu_count": len(report.gpus),
        "gpus": [
            {
                "name": g.name,
                "memory_gib": round(g.memory_total_bytes / 2**30, 1),
                "compute_capability": g.compute_capability,
                "bandwidth_gb_s": _gb_s(bandwidth_for(g.name)),
            }
            for g in report.gpus
        ],
        "gpu_driver": report.driver_version,
        "cuda": report.cuda_version,
    }
    links = gpu_links(report)
    if links:
        fp["gpu_interconnect"] = _interconnect(links)
        bws = [ln.bandwidth_bytes_s for ln in links]
        if all(bws):
            fp["gpu_link_gb_s"] = round(min(b for b in bws if b) / 1e9, 1)  # the slowest pair
    busy = [
        f"GPU {g.index}: {g.memory_used_fraction:.0%} of its memory in use by other processes"
        for g in report.gpus
        if g.memory_used_fraction > BUSY_GPU_FRACTION
    ]
    if busy:
        fp["gpu_notes"] = busy
    return fp


# ---- the fingerprint -------------------------------------------------------------------------


def fingerprint(nvml: Nvml | None = None, cgroup: Path = CGROUP) -> dict:
    """A small dict describing this host, for results and script headers (`nvml` injects an NVML
    reader, by default pynvml when installed; `cgroup` the cgroup folder)."""
    fp = {
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpus": cpu_count(),
        "memory_gib": round(memory_bytes() / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "accelerator": "none (CPU)",
    }
    quota = cgroup_cpu_quota(cgroup)
    if quota is not None:
        fp["cpu_quota"] = quota
    report = gpu_report(nvml)
    if report.gpus:
        fp.update(_gpu_fingerprint(report))
    return fp


def describe(fp: dict) -> str:
    """One line for headers: 'CPU, N CPUs, M GiB RAM, accelerator[, compute, CUDA, driver]'.
    Reads fingerprints of older kvtune versions too (keys may be missing)."""
    cpus = f"{fp['cpus']} CPUs" + (f" (quota {fp['cpu_quota']:g})" if fp.get("cpu_quota") else "")
    parts = [str(fp["cpu"]), cpus, f"{fp['memory_gib']} GiB RAM", str(fp["accelerator"])]
    if fp.get("gpu_count", 0) > 1 and fp.get("gpu_interconnect"):
        parts[-1] += f" over {fp['gpu_interconnect']}"
    parts += [
        f"compute {cc}"
        for cc in dict.fromkeys(g.get("compute_capability") for g in fp.get("gpus") or [] if isinstance(g, dict))
        if cc
    ]
    parts += [f"{label} {fp[k]}" for k, label in (("cuda", "CUDA"), ("gpu_driver", "driver")) if fp.get(k)]
    return ", ".join(parts) + "".join(f"; {n}" for n in fp.get("gpu_notes") or [])


def gpu_lines(fp: dict) -> list[str]:
    """One line per GPU of a fingerprint, for the report and `kvtune plan`: 'GPU 0: NVIDIA H100
    80GB HBM3, 79.6 GiB, compute 9.0, 3350 GB/s (spec sheet)'. Empty for a CPU host."""
    lines = []
    for i, g in enumerate(fp.get("gpus") or []):
        if not isinstance(g, dict):
            continue
        parts = [str(g.get("name")), f"{g.get('memory_gib')} GiB"]
        if g.get("compute_capability"):
            parts.append(f"compute {g['compute_capability']}")
        if g.get("bandwidth_gb_s"):
            parts.append(f"{g['bandwidth_gb_s']:g} GB/s (spec sheet)")
        lines.append(f"GPU {i}: " + ", ".join(parts))
    if fp.get("gpu_interconnect"):
        link = f" ({fp['gpu_link_gb_s']:g} GB/s, slowest pair)" if fp.get("gpu_link_gb_s") else ""
        lines.append(f"between GPUs: {fp['gpu_interconnect']}{link}")
    return lines


def detect_hardware(
    memory_bytes: int | None = None,
    bandwidth_bytes_s: float | None = None,
    gpus: list[GpuInfo] | None = None,
    ram: CpuRam | None = None,
) -> HardwareBudget:
    """`hardware_budget` on this machine's facts (what `kvtune plan` plans for): pure when `gpus`
    and `ram` are given; what is missing is read here, the planner's one edge."""
    if gpus is None or ram is None:
        gpus = gpu_infos() if gpus is None else gpus
        ram = cpu_ram() if ram is None else ram
    return hardware_budget(gpus, ram, memory_bytes, bandwidth_bytes_s)
