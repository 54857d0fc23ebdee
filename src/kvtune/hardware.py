"""Facts about the machine the study runs on: CPU model, usable cores, memory.

Stored with every study and written into the launch script's header, so a result is never read
without knowing what it was measured on.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path


def cpu_ids() -> tuple[int, ...]:
    """The CPUs this process may run on (affinity-aware: containers and cpusets are honored)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:
        return tuple(range(os.cpu_count() or 1))


def cpu_count() -> int:
    return len(cpu_ids())


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
                parts = line[len(prefix):].split() if line.startswith(prefix) else []
                if len(parts) >= 2 and parts[1].isdigit():
                    out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    except OSError:
        pass
    return out


def memory_bytes() -> int:
    """Total RAM (MemTotal), or 0 when /proc/meminfo is unreadable."""
    return _meminfo("/proc/meminfo").get("MemTotal", 0)


def cgroup_memory_headroom() -> int | None:
    """Bytes this cgroup may still allocate (memory.max - memory.current), None without a limit."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        usage = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return int(limit) - usage if limit.isdigit() else None


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
        figures.append(sum(node.get(k, 0) for k in ("MemFree", "Active(file)", "Inactive(file)",
                                                     "SReclaimable")))
    headroom = cgroup_memory_headroom()
    if headroom is not None:
        figures.append(headroom)
    return max(0, min(figures)) if figures else 0


def fingerprint() -> dict:
    """A small dict describing this host, for results and script headers."""
    return {
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpus": cpu_count(),
        "memory_gib": round(memory_bytes() / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "accelerator": "none (CPU)",
    }

    
def describe(fp: dict) -> str:
    return f"{fp['cpu']}, {fp['cpus']} CPUs, {fp['memory_gib']} GiB RAM, {fp['accelerator']}"
