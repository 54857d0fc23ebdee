"""Suggested starting flags per backend, from the model's shape, the hardware and the workload.

`kvtune plan` prints them and `kvtune run` can measure them right after the baseline (the
informed start): a first guess that is sized for the machine instead of the server's defaults,
which are sized for nobody in particular (vLLM takes 92% of a GPU another process is using;
llama-server fits what it can on the GPUs with 4 slots of a context it picks itself). Pure arithmetic on the planner's types: the same
`kv` formulas the pre-screen uses, the spec-sheet budget from `gpus`, and one stated reserve
(`Reserve`: kept back on each GPU, or once beside a CPU server; `kvtune plan`'s table holds back
the same). Each suggestion states the room it sized the KV cache for (`kv_room_bytes`, `budget`),
so the table and the flags can be read against each other. A quantized V cache comes with
flash attention: llama-server refuses `--cache-type-v q8_0` without it.
A suggestion is a start for the search, not a verdict: the tuner still measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kvtune.planner.gpus import HardwareBudget
from kvtune.planner.kv import ModelShape, kv_bytes_per_sequence

GIB = 2**30
GPU_RESERVE_BYTES = 2 * GIB
"""Kept back per GPU for activations, CUDA graphs and the CUDA context: vLLM profiles its own
peak at start-up, so this only has to keep the guess on the safe side of it (small and mid-size
models peak around 1-2 GiB at the default batch; pass --reserve for large ones)."""
CPU_RESERVE_BYTES = 1 * GIB  # the server process, tokenizer and buffers beside the weights
# vLLM's own default share of a GPU's memory (0.32, 0.33: vllm/config/cache.py); the launcher
# passes the installed vLLM's.
VLLM_UTILIZATION = 0.92
UTILIZATION_MARGIN = 0.02  # below what is free: vLLM refuses to start when free < the share
ALL_LAYERS = 999  # llama.cpp clamps --n-gpu-layers to the model's layer count: "all of them"
DTYPES = (("auto", "f16"), ("fp8", "fp8"))  # vLLM --kv-cache-dtype -> planner cache type
LLAMA_CACHE_TYPES = ("f16", "q8_0", "q4_0")


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


@dataclass(frozen=True)
class Reserve:
    """What is kept back for activations, the runtime and fragmentation: `per_device` on each of
    `devices` (the GPUs the memory spans; 1 for a CPU server or a --memory without GPUs). One
    figure for the plan's table and for every suggestion. `given`: --reserve set it (else the
    default, `GPU_RESERVE_BYTES` per GPU or `CPU_RESERVE_BYTES`)."""

    per_device: int
    devices: int
    on_gpu: bool
    given: bool

    @classmethod
    def for_hardware(cls, hw: HardwareBudget, per_device: int | None = None) -> "Reserve":
        """The reserve on `hw`: `per_device` when given (0 included), else the default."""
        on_gpu = hw.kind != "cpu" and bool(hw.gpus)
        default = GPU_RESERVE_BYTES if on_gpu else CPU_RESERVE_BYTES
        return cls(
            default if per_device is None else per_device, len(hw.gpus) if on_gpu else 1, on_gpu, per_device is not None
        )

    @property
    def total(self) -> int:
        return self.per_device * self.devices

    def describe(self) -> str:
        """One line a person reads beside the table: the figure, what it is per, where it came from."""
        where = (
            f"{_gib(self.per_device)} on each of {self.devices} GPUs = {_gib(self.total)}"
            if self.on_gpu and self.devices > 1
            else f"{_gib(self.per_device)} on the GPU"
            if self.on_gpu
            else f"{_gib(self.per_device)} beside the server"
        )
        source = "--reserve" if self.given else "the default; --reserve sets it"
        return f"reserve: {where} ({source}), the same in the suggested flags"


@dataclass(frozen=True)
class Suggestion:
    """One backend's starting flags (names without the leading dashes, as its knobs name them)
    and the reasons a person should know (what did not fit, what was assumed)."""

    backend: str
    flags: dict[str, Any]
    notes: tuple[str, ...] = field(default_factory=tuple)
    fits: bool = True  # False: even the smallest start does not fit this hardware (the notes say why)
    kv_room_bytes: int | None = None  # the memory the KV cache was sized for (weights and reserve out)
    budget: str = ""  # how kv_room_bytes was reached, for people: memory - reserve - weights

    def argv(self) -> list[str]:
        return [a for k, v in self.flags.items() for a in (f"--{k}", str(v))]


def _gpu_share(hw: HardwareBudget, default: float = VLLM_UTILIZATION) -> tuple[float, list[str]]:
    """vLLM's --gpu-memory-utilization on these GPUs: its `default`, or less when another process
    already holds part of a GPU (the least free GPU decides: every tensor-parallel rank needs it)."""
    if hw.kind != "gpu" or not hw.gpus:
        return default, []
    tightest = min(hw.gpus, key=lambda g: g.free_bytes / g.total_bytes if g.total_bytes else 1.0)
    free = tightest.free_bytes / tightest.total_bytes if tightest.total_bytes else 1.0
    if free >= default + UTILIZATION_MARGIN:
        return default, []
    share = max(0.0, math.floor((free - UTILIZATION_MARGIN) * 100) / 100)
    return share, [
        f"GPU {tightest.index} has {free:.0%} of its memory free (another process holds "
        f"the rest): --gpu-memory-utilization {share:g}"
    ]


def _vllm(
    shape: ModelShape, hw: HardwareBudget, users: int, context: int, reserve: int, utilization: float
) -> Suggestion:
    weights = shape.weights_bytes or 0
    notes = [] if shape.weights_bytes else ["weights size unknown: the fit assumes none (pass --weights)"]
    flags: dict[str, Any] = {}
    n_gpus = len(hw.gpus) if hw.kind != "cpu" else 0
    if n_gpus:
        share, busy = _gpu_share(hw, utilization)
        notes += busy
        per_gpu = hw.memory_bytes / n_gpus
        sizes = [p for p in (1, 2, 4, 8, 16, 32) if p <= n_gpus]
        need = weights + users * kv_bytes_per_sequence(shape, context, "fp8")
        tp = next((p for p in sizes if p * (share * per_gpu - reserve) >= need), sizes[-1])
        room = int(tp * (share * per_gpu - reserve) - weights)
        budget = (
            f"{tp} x ({share:g} x {_gib(per_gpu)} - reserve {_gib(reserve)}) - weights {_gib(weights)}"
            f" = {_gib(room)} for the KV cache (vLLM takes {share:g} of each GPU)"
        )
        flags["gpu-memory-utilization"] = share
        if n_gpus > 1:
            flags["tensor-parallel-size"] = tp
    else:
        memory = hw.free_bytes or hw.memory_bytes
        room = int(memory - weights - reserve)
        budget = f"{_gib(memory)} - reserve {_gib(reserve)} - weights {_gib(weights)} = {_gib(room)} for the KV cache"
        notes.append("CPU: vLLM's KV cache is --kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE, not a GPU share")
    dtype, ct = next(
        ((d, c) for d, c in DTYPES if users * kv_bytes_per_sequence(shape, context, c) <= room), DTYPES[-1]
    )
    per_seq = kv_bytes_per_sequence(shape, context, ct)
    fit = max(0, room) // per_seq if per_seq else users
    max_len = context
    if fit < 1:
        per_token = max(1, kv_bytes_per_sequence(shape, 1, ct))
        max_len = max(0, room) // per_token // 16 * 16
        left = f"the {max(0, room) / GIB:.1f} GiB left for the KV cache"
        notes.append(
            f"one {context}-token sequence does not fit in {left}: --max-model-len {max_len}"
            if max_len
            else f"the weights leave no room for a KV cache ({left}): more or larger GPUs"
        )
    elif fit < users:
        notes.append(
            f"{users} users x {context} tokens do not fit even with an fp8 cache: --max-num-seqs {fit} (the rest queue)"
        )
    flags["max-num-seqs"] = max(1, min(users, fit))
    if max_len:
        flags["max-model-len"] = max_len
    flags["kv-cache-dtype"] = dtype
    return Suggestion("vllm", flags, tuple(notes), fits=max_len > 0, kv_room_bytes=room, budget=budget)


def _llama_server(shape: ModelShape, hw: HardwareBudget, users: int, context: int, reserve: int) -> Suggestion:
    weights = shape.weights_bytes or 0
    ctx = users * context  # llama-server splits --ctx-size across its --parallel slots
    flags: dict[str, Any] = {"parallel": users, "ctx-size": ctx}
    notes: list[str] = []
    n_gpus = len(hw.gpus) if hw.kind != "cpu" else 0
    # what a new server may take: free GPU memory / available RAM when read, else the total
    have = hw.free_bytes or hw.memory_bytes
    memory = have - reserve
    free = f"{_gib(have)} free of {_gib(hw.memory_bytes)}" if have != hw.memory_bytes else _gib(have)
    budget = f"{free} - reserve {_gib(reserve)} - weights {_gib(weights)} = {_gib(memory - weights)} for the KV cache"
    ct = next(
        (c for c in LLAMA_CACHE_TYPES if weights + kv_bytes_per_sequence(shape, ctx, c) <= memory), LLAMA_CACHE_TYPES[1]
    )
    if ct != "f16":  # llama-server refuses a quantized V cache without flash attention
        flags.update({"flash-attn": "on", "cache-type-k": ct, "cache-type-v": ct})
        notes.append(f"a {ct} V cache needs flash attention: --flash-attn on")
    kv = kv_bytes_per_sequence(shape, ctx, ct)
    if n_gpus:
        if weights + kv <= memory:
            flags["n-gpu-layers"] = ALL_LAYERS
        else:  # partial offload: each offloaded layer brings its weights and its KV into VRAM
            per_layer = (weights + kv) / shape.layers
            k = max(0, min(shape.layers, int(max(0, memory) // per_layer))) if per_layer else shape.layers
            flags["n-gpu-layers"] = k
            if k == 0:
                notes.append("not one layer fits on the GPU: the server runs on the CPU")
            notes.append(
                f"the model and a {ctx}-token {ct} cache need {(weights + kv) / GIB:.1f} GiB, the "
                f"GPUs have {max(0, memory) / GIB:.1f} GiB: {k} of {shape.layers} layers on the GPU, "
                f"the rest in RAM"
            )
    fits = n_gpus > 0 or weights + kv <= memory  # with GPUs, RAM takes what VRAM cannot
    if not fits:
        notes.append(
            f"the model and a {ctx}-token {ct} cache need {(weights + kv) / GIB:.1f} GiB, more "
            f"than the {max(0, memory) / GIB:.1f} GiB of RAM free: fewer --parallel or a shorter context"
        )
    return Suggestion(
        "llama-server", flags, tuple(notes), fits=fits, kv_room_bytes=int(memory - weights), budget=budget
    )


def suggest(
    shape: ModelShape,
    hw: HardwareBudget,
    users: int,
    context: int,
    reserve_bytes: int | None = None,
    vllm_utilization: float = VLLM_UTILIZATION,
) -> tuple[Suggestion, ...]:
    """Starting flags for vLLM and llama-server serving `users` concurrent sequences of `context`
    tokens (prompt + output) with the model `shape` on `hw`. `reserve_bytes` is kept back on each
    GPU, or once beside a CPU server (`Reserve`; None: the default, 0 is 0); `vllm_utilization`
    is the installed vLLM's --gpu-memory-utilization default (its spec value when vLLM is absent)."""
    users, context = max(1, users), max(1, context)
    if shape.max_positions:
        context = min(context, shape.max_positions)
    reserve = Reserve.for_hardware(hw, reserve_bytes)
    return (
        _vllm(shape, hw, users, context, reserve.per_device, vllm_utilization),
        _llama_server(shape, hw, users, context, reserve.total),
    )
