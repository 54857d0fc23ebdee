"""Which accelerator the plan is for: the GPUs, else the CPU's RAM; bandwidths by model.

The planner needs two facts about the machine: how much memory the cache competes for and how
fast it can be read. `kvtune.hardware` reads them (GPUs through NVML); this module stays pure and
only knows what NVML cannot say: peak memory bandwidth and NVLink bandwidth per GPU model, from
tables of vendor spec-sheet figures matched on the GPU's name, and PCIe bandwidth from the link's
generation and width. Without GPUs the CPU's RAM is used, with bandwidth unknown unless the user
passes --bandwidth. The same tables plan for a GPU the user does not have (`kvtune plan --gpu
"H100 SXM" --gpus 2`): `named_budget` takes memory from `MEMORY_GIB` and bandwidth from the
bandwidth table.

Memory is what the device reports whenever it is there: a GPU of this machine plans with NVML's
total memory (an H200 reports 143771 MiB, about 140.4 GiB, of which CUDA can use about 139.8),
never with the table; `MEMORY_GIB` is only for `--gpu NAME`, hardware that is not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvtune.errors import SpecError

# Peak memory bandwidth in bytes/s, from NVIDIA's public product datasheets (H200, H100, A100,
# L40S, L4, A10, V100, T4 datasheets; GeForce RTX 4090/3090 spec pages). Patterns are matched in
# order against the NVML name upper-cased with "-" and "_" as spaces, most specific first.
BANDWIDTH_TABLE: tuple[tuple[str, str, float], ...] = (
    ("B300", r"\bB300\b", 8.0e12),  # HGX B300 datasheet (Blackwell Ultra): 8 TB/s HBM3e per GPU
    ("B200", r"\bB200\b", 8.0e12),
    # GH200 datasheet: 96 GB HBM3 at 4 TB/s, or 144 GB HBM3e at 4.9 TB/s (NVML names the first
    # "NVIDIA GH200 480GB", by its CPU+GPU memory; the HBM3e name is not confirmed here)
    ("GH200 144GB", r"\bGH200\b.*\b144 ?GB?\b", 4.9e12),
    ("GH200", r"\bGH200\b", 4.0e12),
    ("H200", r"\bH200\b", 4.8e12),
    ("H20", r"\bH20\b", 4.0e12),  # H20 product brief (China market): 96 GB HBM3, 4.0 TB/s
    ("H100 NVL", r"\bH100\b.*\bNVL\b", 3.9e12),
    ("H100 PCIe", r"\bH100\b.*\bPCIE\b", 2.0e12),
    ("H100 SXM", r"\bH100\b", 3.35e12),  # NVML: "NVIDIA H100 80GB HBM3"
    ("A100 80GB PCIe", r"\bA100\b(?=.*\b80GB\b)(?=.*\bPCIE\b)", 1.935e12),
    ("A100 80GB SXM", r"\bA100\b.*\b80GB\b", 2.039e12),  # NVML: "NVIDIA A100-SXM4-80GB"
    ("A100 40GB", r"\bA100\b", 1.555e12),
    ("L40S", r"\bL40S\b", 8.64e11),
    ("L40", r"\bL40\b", 8.64e11),  # L40 datasheet: 48 GB GDDR6 ECC, 864 GB/s
    ("L4", r"\bL4\b", 3.0e11),
    ("A10G", r"\bA10G\b", 6.0e11),  # AWS G5 (no NVIDIA datasheet): 24 GB GDDR6, 600 GB/s as the A10
    ("A10", r"\bA10\b", 6.0e11),
    ("RTX 5090", r"\b5090\b", 1.792e12),  # GeForce RTX 5090 spec page: 32 GB GDDR7, 1792 GB/s
    ("RTX 4090", r"\b4090\b", 1.008e12),
    ("RTX 3090 Ti", r"\b3090 TI\b", 1.008e12),
    ("RTX 3090", r"\b3090\b", 9.36e11),
    ("V100S", r"\bV100S\b", 1.134e12),
    ("V100", r"\bV100\b", 9.0e11),
    ("T4", r"\bT4\b", 3.2e11),
)


# NVLink bandwidth per GPU, both directions together, from the same datasheets (only looked up
# for pairs NVML reports NVLink peer-to-peer on; bridges of PCIe cards included).
NVLINK_TABLE: tuple[tuple[str, str, float], ...] = (
    ("B300", r"\bB300\b", 1.8e12),  # HGX B300: fifth-generation NVLink, 1.8 TB/s per GPU
    ("B200", r"\bB200\b", 1.8e12),
    ("GH200", r"\bGH200\b", 9.0e11),  # GH200 datasheet: NVLink 900 GB/s (GPU to GPU in NVL2/NVL32)
    ("H200", r"\bH200\b", 9.0e11),
    ("H20", r"\bH20\b", 9.0e11),  # H20 product brief: NVLink 900 GB/s
    ("H100 NVL", r"\bH100\b.*\bNVL\b", 6.0e11),
    ("H100 PCIe", r"\bH100\b.*\bPCIE\b", 6.0e11),
    ("H100 SXM", r"\bH100\b", 9.0e11),
    ("A100", r"\bA100\b", 6.0e11),
    ("RTX 3090", r"\b3090\b", 1.125e11),
    ("V100", r"\bV100\b", 3.0e11),
)
# Memory per GPU model in GiB, by the bandwidth table's labels, from the same datasheets (the
# marketed "80GB" taken as 80 GiB; NVML reports a little less, e.g. 79.6 GiB on an H100 SXM).
# Only used to plan for a GPU that is not in this machine.
MEMORY_GIB: dict[str, float] = {
    "B300": 288,  # HGX B300: 2.3 TB for 8 GPUs
    "B200": 180,
    "GH200 144GB": 144,
    "GH200": 96,
    "H200": 141,  # the datasheet's 141 GB; a present H200 reports 143771 MiB (140.4 GiB) and plans with that
    "H20": 96,
    "H100 NVL": 94,
    "H100 PCIe": 80,
    "H100 SXM": 80,
    "A100 80GB PCIe": 80,
    "A100 80GB SXM": 80,
    "A100 40GB": 40,
    "L40S": 48,
    "L40": 48,
    "L4": 24,
    "A10G": 24,
    "A10": 24,
    "RTX 5090": 32,
    "RTX 4090": 24,
    "RTX 3090 Ti": 24,
    "RTX 3090": 24,
    "V100S": 32,
    "V100": 16,
    "T4": 16,
}
# Dense FP16/BF16 tensor TFLOPS (BF16 where the GPU has it; without sparsity: datasheets quote
# twice these "with sparsity"), by the bandwidth table's labels. None: no spec sheet to cite.
# Not used by the KV arithmetic (decode is bound by memory bandwidth): `named_gpu` carries it for
# estimates of compute-bound prefill.
DENSE_TFLOPS: dict[str, float | None] = {
    "B300": 2250,  # HGX B300 datasheet: 36 PFLOPS FP16/BF16 sparse for 8 GPUs (unsure: the sheet moved)
    "B200": 2250,  # HGX B200 datasheet: 36 PFLOPS FP16/BF16 sparse for 8 GPUs
    "GH200 144GB": 989,  # GH200 datasheet: FP16/BF16 1979 TFLOPS sparse (the same H100 GPU)
    "GH200": 989,
    "H200": 989,  # H200 datasheet: BF16 1979 TFLOPS sparse
    "H20": 148,  # H20 product brief: FP16/BF16 148 TFLOPS (unsure whether dense; reported as dense)
    "H100 NVL": 835,  # H100 datasheet: BF16 1671 sparse (NVL)
    "H100 PCIe": 756,  # H100 datasheet: BF16 1513 sparse (PCIe)
    "H100 SXM": 989,  # H100 datasheet: BF16 1979 sparse (SXM)
    "A100 80GB PCIe": 312,  # A100 datasheet: BF16 312, 624 sparse
    "A100 80GB SXM": 312,
    "A100 40GB": 312,
    "L40S": 362,  # L40S datasheet: BF16 362.05, 733 sparse
    "L40": 181,  # L40 datasheet: BF16 181.05, 362.1 sparse
    "L4": 121,  # L4 datasheet: BF16 121, 242 sparse
    "A10G": None,  # AWS publishes no tensor figure for the A10G (clocked below the A10)
    "A10": 125,  # A10 datasheet: BF16 125, 250 sparse
    "RTX 5090": 209.5,  # Blackwell GeForce whitepaper, FP16 tensor with FP32 accumulate (unsure)
    "RTX 4090": 165.2,  # Ada whitepaper: FP16 tensor with FP32 accumulate 165.2, 330.4 sparse
    "RTX 3090 Ti": 80,  # GA102 (unsure: scaled from the 3090 by clock)
    "RTX 3090": 71,  # Ampere GA102 whitepaper: FP16 tensor with FP32 accumulate 71
    "V100S": 130,  # V100S datasheet: FP16 tensor 130 (no BF16)
    "V100": 125,  # V100 datasheet (SXM2): FP16 tensor 125 (no BF16)
    "T4": 65,  # T4 datasheet: FP16 tensor 65 (no BF16)
}
# PCIe bytes/s per lane and direction after line coding, by generation (PCI-SIG).
PCIE_LANE_BYTES_S = {1: 2.5e8, 2: 5.0e8, 3: 9.85e8, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}


def _lookup(table: tuple[tuple[str, str, float], ...], name: str) -> float | None:
    norm = re.sub(r"[-_]", " ", str(name).upper())
    for _label, pattern, bw in table:
        if re.search(pattern, norm):
            return bw
    return None


def _norm(name: str) -> str:
    return re.sub(r"[\s_-]+", "", str(name).upper())


def known_gpus() -> tuple[str, ...]:
    """The GPU models `named_gpu` knows, as `kvtune plan --gpu` takes them."""
    return tuple(label for label, _p, _bw in BANDWIDTH_TABLE)


@dataclass(frozen=True)
class GpuModel:
    """A GPU model from the spec-sheet tables: what `kvtune plan --gpu` plans with."""

    label: str
    memory_bytes: int
    bandwidth_bytes_s: float
    nvlink_bytes_s: float | None
    dense_tflops: float | None = None  # FP16/BF16 tensor, without sparsity (None: no sheet to cite)


def named_gpu(name: str) -> GpuModel:
    """The GPU model called `name`: a table label ("H100 SXM", "h100-sxm", "RTX 4090") or a
    name as NVML spells it ("NVIDIA H100 80GB HBM3"). Unknown: `SpecError` naming the known."""
    labels = {_norm(label): label for label in known_gpus()}
    label = labels.get(_norm(name))
    if label is None:
        norm = re.sub(r"[-_]", " ", str(name).upper())
        label = next((lb for lb, pattern, _bw in BANDWIDTH_TABLE if re.search(pattern, norm)), None)
    if label is None:
        raise SpecError(f"unknown GPU {name!r}: use one of {', '.join(known_gpus())}")
    bandwidth = dict((lb, bw) for lb, _p, bw in BANDWIDTH_TABLE)[label]
    return GpuModel(
        label, int(MEMORY_GIB[label] * 2**30), bandwidth, nvlink_bandwidth_for(label), DENSE_TFLOPS.get(label)
    )


def bandwidth_for(name: str) -> float | None:
    """Spec-sheet memory bandwidth (bytes/s) of a GPU named like NVML names it, or None."""
    return _lookup(BANDWIDTH_TABLE, name)


def nvlink_bandwidth_for(name: str) -> float | None:
    """Spec-sheet NVLink bandwidth (bytes/s, both directions) of a GPU model, or None."""
    return _lookup(NVLINK_TABLE, name)


def pcie_bandwidth(generation: int | None, width: int | None) -> float | None:
    """A PCIe link's bandwidth (bytes/s, both directions, as datasheets quote it: Gen5 x16 is
    about 128 GB/s), or None when the generation or width is unknown."""
    if not width or generation not in PCIE_LANE_BYTES_S:
        return None
    return 2 * PCIE_LANE_BYTES_S[generation] * width


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the plan sees it: memory and peak memory bandwidth."""

    index: int
    name: str
    total_bytes: int
    free_bytes: int
    bandwidth_bytes_s: float | None


@dataclass(frozen=True)
class CpuRam:
    """The host's RAM, used when there is no GPU."""

    cpu_model: str
    total_bytes: int
    available_bytes: int


@dataclass(frozen=True)
class HardwareBudget:
    """Memory and bandwidth the plan uses, and where they came from."""

    kind: str  # "gpu", "cpu", "given" or "named" (a spec-sheet GPU)
    description: str
    memory_bytes: int
    free_bytes: int | None
    bandwidth_bytes_s: float | None
    gpus: tuple[GpuInfo, ...] = ()


def hardware_budget(
    gpus: list[GpuInfo], ram: CpuRam, memory_bytes: int | None = None, bandwidth_bytes_s: float | None = None
) -> HardwareBudget:
    """All GPUs together (as with tensor parallelism: memory and bandwidth add up), else CPU RAM.

    --memory and --bandwidth (already parsed to bytes) override the facts."""
    free: int | None
    bw: float | None
    if gpus:
        names = sorted({g.name for g in gpus})
        desc = f"{len(gpus)} x {names[0]}" if len(names) == 1 else ", ".join(g.name for g in gpus)
        bws = [g.bandwidth_bytes_s for g in gpus]
        bw = sum(b for b in bws if b is not None) if all(bws) else None
        kind, total, free = "gpu", sum(g.total_bytes for g in gpus), sum(g.free_bytes for g in gpus)
    else:
        kind, desc, total, free, bw = (
            "cpu",
            f"CPU RAM ({ram.cpu_model})",
            ram.total_bytes,
            ram.available_bytes or None,
            None,
        )
    if memory_bytes is not None:
        kind, desc, total, free = "given", f"--memory (probed: {desc})", memory_bytes, None
    if bandwidth_bytes_s is not None:
        bw = bandwidth_bytes_s
    return HardwareBudget(kind, desc, total, free, bw, tuple(gpus))


def named_budget(
    name: str, count: int = 1, memory_bytes: int | None = None, bandwidth_bytes_s: float | None = None
) -> HardwareBudget:
    """`count` GPUs of the model called `name`, from the spec-sheet tables (hardware the user
    may not have: nothing is read from this machine). --memory and --bandwidth still override."""
    if count < 1:
        raise SpecError(f"--gpus must be at least 1, got {count}")
    model = named_gpu(name)
    gpus = [
        GpuInfo(i, model.label, model.memory_bytes, model.memory_bytes, model.bandwidth_bytes_s) for i in range(count)
    ]
    budget = hardware_budget(gpus, CpuRam("", 0, 0), memory_bytes, bandwidth_bytes_s)
    if budget.kind == "gpu":
        budget = HardwareBudget(
            "named",
            f"{count} x {model.label} (spec sheet: "
            f"{MEMORY_GIB[model.label]:g} GiB, {model.bandwidth_bytes_s / 1e12:.2f} TB/s each)",
            budget.memory_bytes,
            None,
            budget.bandwidth_bytes_s,
            budget.gpus,
        )
    return budget


def first_gpus(gpus: list[GpuInfo], count: int | None) -> list[GpuInfo]:
    """The first `count` of this machine's GPUs (all when None); `SpecError` when it has fewer."""
    if count is None:
        return gpus
    if count < 1:
        raise SpecError(f"--gpus must be at least 1, got {count}")
    if count > len(gpus):
        raise SpecError(
            f"--gpus {count}: this machine has {len(gpus)} GPU(s); add --gpu NAME to plan for GPUs it does not have"
        )
    return gpus[:count]
