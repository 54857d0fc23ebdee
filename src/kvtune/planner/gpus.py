"""Which accelerator the plan is for: GPUs through NVML, else the CPU's RAM; bandwidth by model.

The planner needs two facts about the machine: how much memory the cache competes for and how
fast it can be read. NVML (nvidia-ml-py, `import pynvml`) gives each GPU's name and total/free
memory; NVML does not report peak memory bandwidth, so it comes from a table of vendor spec-sheet
figures matched on the GPU's name. Probing never raises: no pynvml, no driver or no GPU means an
empty list and the CPU's RAM is used, with bandwidth unknown unless the user passes --bandwidth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvtune import hardware

# Peak memory bandwidth in bytes/s, from NVIDIA's public product datasheets (H200, H100, A100,
# L40S, L4, A10, V100, T4 datasheets; GeForce RTX 4090/3090 spec pages). Patterns are matched in
# order against the NVML name upper-cased with "-" and "_" as spaces, most specific first.
BANDWIDTH_TABLE: tuple[tuple[str, str, float], ...] = (
    ("B200", r"\bB200\b", 8.0e12),
    ("H200", r"\bH200\b", 4.8e12),
    ("H100 NVL", r"\bH100\b.*\bNVL\b", 3.9e12),
    ("H100 PCIe", r"\bH100\b.*\bPCIE\b", 2.0e12),
    ("H100 SXM", r"\bH100\b", 3.35e12),               # NVML: "NVIDIA H100 80GB HBM3"
    ("A100 80GB PCIe", r"\bA100\b(?=.*\b80GB\b)(?=.*\bPCIE\b)", 1.935e12),
    ("A100 80GB SXM", r"\bA100\b.*\b80GB\b", 2.039e12),  # NVML: "NVIDIA A100-SXM4-80GB"
    ("A100 40GB", r"\bA100\b", 1.555e12),
    ("L40S", r"\bL40S\b", 8.64e11),
    ("L40", r"\bL40\b", 8.64e11),
    ("L4", r"\bL4\b", 3.0e11),
    ("A10", r"\bA10G?\b", 6.0e11),
    ("RTX 4090", r"\b4090\b", 1.008e12),
    ("RTX 3090 Ti", r"\b3090 TI\b", 1.008e12),
    ("RTX 3090", r"\b3090\b", 9.36e11),
    ("V100S", r"\bV100S\b", 1.134e12),
    ("V100", r"\bV100\b", 9.0e11),
    ("T4", r"\bT4\b", 3.2e11),
)


def bandwidth_for(name: str) -> float | None:
    """Spec-sheet memory bandwidth (bytes/s) of a GPU named like NVML names it, or None."""
    norm = re.sub(r"[-_]", " ", str(name).upper())
    for _label, pattern, bw in BANDWIDTH_TABLE:
        if re.search(pattern, norm):
            return bw
    return None


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    total_bytes: int
    free_bytes: int
    bandwidth_bytes_s: float | None


def probe_gpus() -> list[GpuInfo]:
    """Every GPU NVML sees; [] when pynvml, the driver or the GPUs are missing. Never raises."""
    try:
        import pynvml
    except Exception:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:
        return []
    gpus: list[GpuInfo] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(GpuInfo(i, name, int(mem.total), int(mem.free), bandwidth_for(name)))
    except Exception:
        pass  # keep what was read before the failure
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return gpus


def _mem_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass(frozen=True)
class HardwareBudget:
    """Memory and bandwidth the plan uses, and where they came from."""

    kind: str                       # "gpu", "cpu" or "given"
    description: str
    memory_bytes: int
    free_bytes: int | None
    bandwidth_bytes_s: float | None
    gpus: tuple[GpuInfo, ...] = ()


def detect_hardware(memory_bytes: int | None = None, bandwidth_bytes_s: float | None = None,
                    gpus: list[GpuInfo] | None = None) -> HardwareBudget:
    """All GPUs together (as with tensor parallelism: memory and bandwidth add up), else CPU RAM.

    --memory and --bandwidth (already parsed to bytes) override what was probed; `gpus` lets
    tests and callers pass a probe result instead of touching NVML."""
    gpus = probe_gpus() if gpus is None else gpus
    if gpus:
        names = sorted({g.name for g in gpus})
        desc = f"{len(gpus)} x {names[0]}" if len(names) == 1 else ", ".join(g.name for g in gpus)
        bws = [g.bandwidth_bytes_s for g in gpus]
        bw = sum(bws) if all(bws) else None
        kind, total, free = "gpu", sum(g.total_bytes for g in gpus), sum(g.free_bytes for g in gpus)
    else:
        kind, desc, total, free, bw = "cpu", f"CPU RAM ({hardware.cpu_model()})", hardware.memory_bytes(), \
            _mem_available() or None, None
    if memory_bytes is not None:
        kind, desc, total, free = "given", f"--memory (probed: {desc})", memory_bytes, None
    if bandwidth_bytes_s is not None:
        bw = bandwidth_bytes_s
    return HardwareBudget(kind, desc, total, free, bw, tuple(gpus))
