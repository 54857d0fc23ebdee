"""Facts about the machine the study runs on: CPU model, usable cores, memory.

Stored with every study and written into the launch script's header, so a result is never read
without knowing what it was measured on.
"""

from __future__ import annotations

import os
import platform


def cpu_count() -> int:
    """Cores this process may run on (affinity-aware, so containers and cpusets are honored)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


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
