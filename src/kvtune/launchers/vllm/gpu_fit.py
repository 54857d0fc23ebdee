"""vLLM's GPU memory, before and after a launch: the fit pre-screen and the KV-token prediction.

vLLM on a GPU takes ``ceil(gpu-memory-utilization x total memory)`` of each GPU it runs on and
refuses to start when a GPU has less than that free (vllm/v1/worker/utils.py: request_memory).
Out of that budget come the weights (split by tensor parallelism), a reserve for what its profile
run measures (activation peak, non-torch buffers such as NCCL and cuBLAS workspaces) and, unless
``--enforce-eager``, the CUDA-graph pool it estimates; the rest is the KV cache, which must hold at
least one ``--max-model-len`` sequence. A trial that provably cannot fit is not launched: GPU
launches cost a minute of start-up, and their failures are slow to read.

The reserve is a stated figure, not a measurement: `ACTIVATION_RESERVE_BYTES` (1 GiB per GPU) for
the profile run's activations and the non-torch buffers, plus `CUDA_GRAPH_RESERVE_BYTES` (0.5 GiB
per GPU) when CUDA graphs are captured. Both are round lower figures for a 7-8B model at vLLM's
default token budget (activations of an 8k-token forward pass are ~0.5-1 GiB, graph pools a few
hundred MiB to ~1 GiB): the pre-screen only refuses what cannot fit, so the reserve errs low.

After a launch, vLLM logs the KV memory it found (``Available KV cache memory: X GiB`` per GPU,
or the explicit ``kv_cache_memory_bytes``) and the tokens it holds (``GPU KV cache size: N
tokens``); `predicted_kv_tokens` divides the former by the planner's bytes per token per GPU, so
the trial records how well the planner's arithmetic matches vLLM's. `planned_kv_tokens` is the
pre-launch estimate from the budget above (it shows how far the stated reserve is off). Pure.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from kvtune.errors import SpecError
from kvtune.planner.gpus import GpuInfo
from kvtune.planner.kv import ModelShape, kv_bytes_per_sequence, kv_bytes_per_token

GiB = 1 << 30
ACTIVATION_RESERVE_BYTES = 1 * GiB
CUDA_GRAPH_RESERVE_BYTES = GiB // 2
# vLLM's --gpu-memory-utilization default (vllm/config/cache.py, 0.32 and 0.33); the launcher
# passes the installed vLLM's (defaults.py).
DEFAULT_UTILIZATION = 0.92
DEFAULT_GPU_BLOCK = 16  # vLLM's CUDA --block-size default


def _g(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def reserve_bytes(enforce_eager: bool) -> int:
    """The per-GPU reserve beside weights and KV (see the module docstring for the figures)."""
    return ACTIVATION_RESERVE_BYTES + (0 if enforce_eager else CUDA_GRAPH_RESERVE_BYTES)


def rank_shape(shape: ModelShape, tp: int) -> ModelShape:
    """The shape one tensor-parallel rank caches: KV heads split across ranks (at least one per
    rank: vLLM replicates heads when there are fewer than ranks); an MLA latent is not split."""
    if shape.is_mla or tp <= 1:
        return shape
    return replace(shape, kv_heads=max(1, shape.kv_heads // tp))


def kv_bytes_per_token_per_gpu(shape: ModelShape, kv_dtype: str, tp: int) -> int | None:
    """Bytes one cached token takes on each GPU (None: a dtype the planner cannot size)."""
    try:
        return kv_bytes_per_token(rank_shape(shape, tp), kv_dtype)
    except SpecError:
        return None


def prescreen_gpu_fit(
    shape: ModelShape,
    gpus: Sequence[GpuInfo],
    *,
    utilization: float,
    tp: int,
    max_model_len: int,
    kv_dtype: str,
    enforce_eager: bool,
) -> str | None:
    """A one-line reason, with the arithmetic, when a vLLM server with these flags cannot start
    on `gpus` (the trial's GPUs, in the order it uses them); None when it may fit or the facts
    are missing. Checks each of the first `tp` GPUs: free memory >= vLLM's request, and weights
    / tp + reserve + one --max-model-len sequence of KV / tp <= the request."""
    used = list(gpus)[:tp]
    if not used or len(used) < tp:
        return None  # the GPU count is checked elsewhere; without facts nothing is provable
    for g in used:
        request = math.ceil(utilization * g.total_bytes)
        if g.free_bytes < request:
            return (
                f"GPU {g.index} has {_g(g.free_bytes)} free < --gpu-memory-utilization "
                f"{utilization:g} x {_g(g.total_bytes)} = {_g(request)}, which vLLM requests at start"
            )
    try:
        kv = kv_bytes_per_sequence(rank_shape(shape, tp), max_model_len, kv_dtype)
    except SpecError:
        kv = 0  # a dtype the planner cannot size: check the rest
    weights = math.ceil((shape.weights_bytes or 0) / tp)
    reserve = reserve_bytes(enforce_eager)
    need = weights + reserve + kv
    g = min(used, key=lambda d: d.total_bytes)
    budget = math.ceil(utilization * g.total_bytes)
    if need <= budget:
        return None
    split = f" / TP {tp}" if tp > 1 else ""
    graphs = "no CUDA graphs (--enforce-eager)" if enforce_eager else f"CUDA graphs {_g(CUDA_GRAPH_RESERVE_BYTES)}"
    return (
        f"weights {_g(shape.weights_bytes or 0)}{split} + reserve {_g(reserve)} (activations "
        f"{_g(ACTIVATION_RESERVE_BYTES)}, {graphs}) + KV {_g(kv)} (one --max-model-len "
        f"{max_model_len} sequence, {kv_dtype}{split}) = {_g(need)} > --gpu-memory-utilization "
        f"{utilization:g} x {_g(g.total_bytes)} = {_g(budget)} on GPU {g.index}"
    )


def predicted_kv_tokens(
    kv_bytes_per_gpu: int, shape: ModelShape, kv_dtype: str, tp: int, block_size: int | None
) -> int | None:
    """Tokens a KV cache of `kv_bytes_per_gpu` on each GPU holds, in whole blocks as vLLM
    allocates them (None: the dtype cannot be sized)."""
    per_token = kv_bytes_per_token_per_gpu(shape, kv_dtype, tp)
    if not per_token or kv_bytes_per_gpu <= 0:
        return None
    block = block_size or 1
    return kv_bytes_per_gpu // (per_token * block) * block


def planned_kv_tokens(
    shape: ModelShape,
    gpus: Sequence[GpuInfo],
    *,
    utilization: float,
    tp: int,
    kv_dtype: str,
    enforce_eager: bool,
    block_size: int | None,
) -> int | None:
    """The pre-launch estimate of vLLM's KV tokens: (request - weights / tp - reserve) on the
    smallest of the trial's GPUs, over the bytes per token per GPU. None without facts."""
    used = list(gpus)[:tp]
    if not used or len(used) < tp or not shape.weights_bytes:
        return None
    total = min(g.total_bytes for g in used)
    left = math.ceil(utilization * total) - math.ceil(shape.weights_bytes / tp) - reserve_bytes(enforce_eager)
    return predicted_kv_tokens(left, shape, kv_dtype, tp, block_size) if left > 0 else 0


def kv_prediction(
    facts: dict,
    args: dict,
    shape: ModelShape | None,
    gpus: Sequence[GpuInfo] = (),
    default_utilization: float = DEFAULT_UTILIZATION,
) -> dict:
    """What a trial records beside vLLM's logged ``kv_cache_tokens``: ``kv_cache_tokens_predicted``
    (the KV memory vLLM reports, over the planner's bytes per token), its relative error
    ``kv_cache_tokens_error``, and on GPUs ``kv_cache_tokens_planned`` (the pre-launch estimate).
    `facts` is `parse_startup_log`'s answer, `args` the server's non-default engine arguments
    (what it really ran with: a value left at its default is absent, so `default_utilization`
    is the server's own). Empty when the shape or the figures are missing."""
    if shape is None:
        return {}
    dtype = str(args.get("kv_cache_dtype") or "auto")
    tp = int(args.get("tensor_parallel_size") or 1)
    block = args.get("block_size")
    explicit = args.get("kv_cache_memory_bytes")
    if explicit:
        kv_bytes = int(explicit)
    elif facts.get("kv_available_gib") is not None:
        kv_bytes = int(facts["kv_available_gib"] * GiB)
        block = block or DEFAULT_GPU_BLOCK
    elif facts.get("kv_cache_gib") is not None:
        kv_bytes = int(facts["kv_cache_gib"] * GiB)
    else:
        return {}
    out: dict = {}
    predicted = predicted_kv_tokens(kv_bytes, shape, dtype, tp, int(block) if block else None)
    if predicted is not None:
        out["kv_cache_tokens_predicted"] = predicted
        logged = facts.get("kv_cache_tokens")
        if logged:
            out["kv_cache_tokens_error"] = round((predicted - logged) / logged, 4)
    if facts.get("kv_cache_device") == "GPU" and not explicit and gpus:
        planned = planned_kv_tokens(
            shape,
            gpus,
            utilization=float(args.get("gpu_memory_utilization") or default_utilization),
            tp=tp,
            kv_dtype=dtype,
            enforce_eager=bool(args.get("enforce_eager")),
            block_size=int(block) if block else DEFAULT_GPU_BLOCK,
        )
        if planned is not None:
            out["kv_cache_tokens_planned"] = planned
    return out
