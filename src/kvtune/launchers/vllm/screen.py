"""What vLLM refuses, found before a launch: the pre-screen (`precheck`) and the choices a
candidate is offered given the flags drawn before it (`offered_choices`), with the tables they
read (the CPU build's limits; vLLM's own choices come from defaults.py). Split from flags.py (issue 18: modules under
~400 lines); the launcher's methods call these with itself. Pure: every fact comes from the
launcher's fields.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvtune.knobs import Candidate, Knob
from kvtune.launchers.vllm.gpu_fit import prescreen_gpu_fit
from kvtune.launchers.vllm.installed import CPU
from kvtune.launchers.vllm.values import _int, id_list, parse_id_list
from kvtune.workload import Workload

if TYPE_CHECKING:
    from kvtune.launchers.vllm.flags import VllmLauncher

MiB, GiB = 1 << 20, 1 << 30
THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
# What the CPU attention backend supports and computes correctly (bfloat16/float16 = auto).
CPU_KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
FP8_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
# CPU features vLLM's CPU fp8 KV cache needs (any one of them).
FP8_CPU_FLAGS = frozenset({"avx512f", "amx_tile"})
CPU_BLOCK_MULTIPLE = 32
# vLLM's own CPU defaults on the OpenAI server, used when a candidate leaves a flag unset (GPU
# defaults depend on the card, so on GPUs only explicit values are compared).
DEFAULT_BATCHED_TOKENS = {CPU: 2048}
DEFAULT_MAX_SEQS = {CPU: 128}
# The largest share of available memory kvtune lets a CPU KV cache take.
KV_RAM_FRACTION = 0.5
INT_FLAGS = (
    "max-model-len",
    "max-num-seqs",
    "max-num-batched-tokens",
    "block-size",
    "kv-cache-memory-bytes",
    "tensor-parallel-size",
)


def offered_choices(lau: VllmLauncher, knob: Knob, flags: dict[str, Any]) -> tuple:
    """What precheck would refuse in combination with the flags drawn before (or with the
    model and the GPUs), not offered: a token budget below --max-num-seqs; chunked prefill
    off when the token budget cannot hold a whole --max-model-len sequence; a CPU KV cache
    smaller than one such sequence; a tensor-parallel size that does not divide the heads
    or exceeds the GPUs."""
    kind = lau.build.kind
    max_len = _int(flags.get("max-model-len", lau.model_max_len()))
    if knob.name == "max-num-batched-tokens":
        seqs = _int(flags.get("max-num-seqs", DEFAULT_MAX_SEQS.get(kind)))
        return tuple(c for c in knob.choices if seqs is None or (_int(c) or 0) >= seqs)
    if knob.name == "enable-chunked-prefill" and "max-num-batched-tokens" in flags:
        batched = _int(flags["max-num-batched-tokens"])
        if batched is not None and max_len is not None and batched < max_len:
            return tuple(c for c in knob.choices if c is not False)
    if knob.name == "tensor-parallel-size":
        heads = lau.shape.attention_heads if lau.shape else None
        gpus = 1 if lau.on_cpu else lau.build.gpu_count  # the CPU build runs one rank
        return tuple(
            c for c in knob.choices if (n := _int(c) or 0) >= 1 and (not heads or heads % n == 0) and n <= gpus
        )
    if knob.name == "gpu-memory-utilization" and not lau.on_cpu and lau.gpus:
        used = lau.gpus[: _int(flags.get("tensor-parallel-size")) or 1]
        fits = tuple(c for c in knob.choices if all(math.ceil(float(c) * g.total_bytes) <= g.free_bytes for g in used))
        return fits or knob.choices  # none fits: precheck says why
    if knob.name == "kv-cache-memory-bytes" and lau.on_cpu and max_len is not None:
        per_token = lau.kv_bytes_per_token(str(flags.get("kv-cache-dtype", "auto")))
        if per_token:
            return tuple(c for c in knob.choices if (_int(c) or 0) // per_token >= max_len)
    return knob.choices


def precheck(lau: VllmLauncher, candidate: Candidate, workload: Workload) -> str | None:
    f = dict(candidate.flags)
    for key in INT_FLAGS:
        if key in f:
            try:
                f[key] = int(f[key])
            except (TypeError, ValueError):
                return f"--{key} must be an integer, got {f[key]!r}"
            if f[key] < 1:
                return f"--{key} must be at least 1, got {f[key]}"
    kind = lau.build.kind
    limit = lau.model_max_len()
    max_len = f.get("max-model-len", limit)
    if max_len is not None and max_len < workload.request_tokens:
        return f"--max-model-len {max_len} < request length {workload.request_tokens} ({workload.request_parts()})"
    if limit is not None and "max-model-len" in f and f["max-model-len"] > limit:
        return f"--max-model-len {f['max-model-len']} exceeds the model's {limit} positions"
    seqs = f.get("max-num-seqs", DEFAULT_MAX_SEQS.get(kind))
    batched = f.get("max-num-batched-tokens", DEFAULT_BATCHED_TOKENS.get(kind))
    if batched is not None and seqs is not None and batched < seqs:
        return f"--max-num-batched-tokens {batched} < --max-num-seqs {seqs}"
    # Unset, vLLM raises its default batch to max-model-len itself when chunked prefill is off.
    explicit = "max-num-batched-tokens" in f
    if (
        f.get("enable-chunked-prefill") is False
        and explicit
        and max_len is not None
        and f["max-num-batched-tokens"] < max_len
    ):
        return f"without chunked prefill --max-num-batched-tokens {batched} must hold a whole --max-model-len {max_len}"
    dtype = str(f.get("kv-cache-dtype", "auto"))
    if dtype not in lau.engine.kv_cache_dtypes:
        return f"--kv-cache-dtype {dtype!r} is not one of vLLM's choices ({lau.engine.source})"
    if "gpu-memory-utilization" in f:
        try:
            util = float(f["gpu-memory-utilization"])
        except (TypeError, ValueError):
            return f"--gpu-memory-utilization must be a number, got {f['gpu-memory-utilization']!r}"
        if not 0 < util <= 1:
            return f"--gpu-memory-utilization must be in (0, 1], got {util}"
    tp = f.get("tensor-parallel-size", 1)
    heads = lau.shape.attention_heads if lau.shape else None
    if heads and heads % tp:
        return f"{heads} attention heads are not divisible by --tensor-parallel-size {tp}"
    if lau.on_cpu:
        reason = precheck_cpu(lau, f, dtype, max_len, tp)
    elif tp > lau.build.gpu_count:
        reason = f"--tensor-parallel-size {tp} > {lau.build.gpu_count} visible GPU(s)"
    else:
        reason = precheck_gpu(lau, f, dtype, max_len, tp)
    if reason:
        return reason
    return precheck_env(lau, candidate.env)


def precheck_cpu(lau: VllmLauncher, f: dict, dtype: str, max_len: int | None, tp: int) -> str | None:
    if dtype not in CPU_KV_DTYPES:
        return (
            f"--kv-cache-dtype {dtype} is not supported by vLLM's CPU backend (use one of {', '.join(CPU_KV_DTYPES)})"
        )
    head_dim = lau.shape.head_dim if lau.shape else None
    if dtype in FP8_DTYPES and not lau.fp8_capable:
        return "an fp8 KV cache on CPU needs x86 with AVX-512 or AMX"
    if dtype in FP8_DTYPES and head_dim and head_dim % 32:
        return f"an fp8 KV cache on CPU needs a head size divisible by 32 (model: {head_dim})"
    block = f.get("block-size")
    if block is not None and block % CPU_BLOCK_MULTIPLE:
        return f"--block-size {block}: vLLM's CPU attention needs a multiple of {CPU_BLOCK_MULTIPLE}"
    if "gpu-memory-utilization" in f:
        return "--gpu-memory-utilization is for GPUs; on CPU the KV cache is --kv-cache-memory-bytes"
    if tp > 1:
        return "--tensor-parallel-size > 1 is for GPUs (vLLM's CPU build: one NUMA node per rank)"
    kv = f.get("kv-cache-memory-bytes", lau.default_kv_bytes())
    cap = lau.kv_cap_bytes()
    if cap and kv > cap:
        return (
            f"--kv-cache-memory-bytes {kv / GiB:.2f} GiB > {KV_RAM_FRACTION:.0%} of the "
            f"{lau.memory_bytes / GiB:.2f} GiB available"
        )
    per_token = lau.kv_bytes_per_token(dtype)
    if per_token and max_len is not None and kv // per_token < max_len:
        return (
            f"--kv-cache-memory-bytes {kv / MiB:.0f} MiB holds {kv // per_token} tokens, "
            f"fewer than one --max-model-len {max_len} sequence"
        )
    return None


def precheck_gpu(lau: VllmLauncher, f: dict, dtype: str, max_len: int | None, tp: int) -> str | None:
    """Weights + reserve + one --max-model-len sequence in the GPUs' budget (gpu_fit)."""
    if lau.shape is None or max_len is None or not lau.gpus or "kv-cache-memory-bytes" in f:
        return None
    if len(lau.gpus) < tp:
        return f"--tensor-parallel-size {tp} > the {len(lau.gpus)} GPU(s) this trial gets"
    return prescreen_gpu_fit(
        lau.shape,
        lau.gpus,
        tp=tp,
        max_model_len=int(max_len),
        kv_dtype=dtype,
        utilization=float(f.get("gpu-memory-utilization", lau.engine.gpu_memory_utilization)),
        enforce_eager=f.get("enforce-eager") is True,
    )


def precheck_env(lau: VllmLauncher, env: dict[str, str]) -> str | None:
    bind = env.get(THREADS_BIND)
    if bind is None or bind in ("auto", "nobind"):
        return None
    if not lau.on_cpu:
        return f"{THREADS_BIND} only applies to vLLM's CPU build"
    ids = parse_id_list(bind)
    if not ids:
        return f"{THREADS_BIND}={bind!r} is not 'auto', 'nobind' or a CPU list like 0-3"
    outside = sorted(set(ids) - set(lau.cpu_ids))
    if outside:
        return f"{THREADS_BIND}={bind} names CPU(s) {id_list(outside)} this process cannot use"
    return None
