"""Small value helpers for vLLM's flags: CPU lists in vLLM's syntax, the --max-model-len choices,
flag values read leniently, and the GPUs a server sees under CUDA_VISIBLE_DEVICES. Pure; kept
apart so flags.py stays readable in one sitting.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from kvtune.hardware import cuda_visible_devices
from kvtune.launchers.vllm.defaults import EngineDefaults
from kvtune.planner.gpus import GpuInfo
from kvtune.workload import Workload

# The flags whose value other than this one (or unset) changes what the model answers
# (`Launcher.numerics_changed`): an fp8 KV cache, speculation, another dtype or quantisation.
SAME_NUMERICS: dict[str, Any] = {
    "kv-cache-dtype": "auto",
    "speculative-config": None,
    "dtype": "auto",
    "quantization": None,
}


def id_list(ids: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 5) -> "0-2,5": vLLM's CPU-list syntax."""
    parts, ids = [], sorted(ids)
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def parse_id_list(text: str) -> list[int] | None:
    """ "0-2,5" -> [0, 1, 2, 5]; None when malformed."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            return None
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            return None
        out.extend(range(lo, hi + 1))
    return out


def max_len_choices(workload: Workload, limit: int | None) -> tuple[int, ...]:
    """The request length rounded up to 256, x1, x2, x4, within the model's positions."""
    base = int(math.ceil(workload.request_tokens / 256.0) * 256)
    if limit is None:
        return (base, base * 2, base * 4)
    fallback = limit if limit >= workload.request_tokens else base  # the model's length, when it holds a request
    return tuple(v for v in (base, base * 2, base * 4) if v <= limit) or (fallback,)


def _int(v: Any) -> int | None:
    """A flag value as an int (study files may write "2048"), or None."""
    try:
        return None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError):
        return None


def _pow2_range(low: int, high: int) -> tuple[int, ...]:
    out, v = [], 1
    while v <= high:
        if v >= low:
            out.append(v)
        v *= 2
    return tuple(out)


def gpus_in_view(gpus: list[GpuInfo], env: Mapping[str, str]) -> tuple[GpuInfo, ...]:
    """The GPUs a server sees under `env`'s CUDA_VISIBLE_DEVICES, in its order (all when unset or
    not plain indices, e.g. UUIDs); parsed by hardware.cuda_visible_devices, the one parser."""
    parts = cuda_visible_devices(env)
    if parts is None or not all(p.isdigit() for p in parts):
        return tuple(gpus)
    by_index = {g.index: g for g in gpus}
    return tuple(by_index[int(p)] for p in parts if int(p) in by_index)


# vLLM V1's own values (vllm/engine/arg_utils.py, 0.10 and later) where they do not depend on the
# card or the model: a tie between configs goes to the one that changes fewer of them. EngineArgs
# leaves these None (decided per platform), so they are not read from the installed package.
V1_DEFAULTS: dict[str, Any] = {"enable-prefix-caching": True, "enable-chunked-prefill": True}
GPU_BLOCK_SIZE = 16  # vLLM's CUDA --block-size (EngineArgs: None, the platform decides)
# Read from EngineArgs' defaults (defaults.py) on GPUs.
GPU_READ_FLAGS = ("kv-cache-dtype", "gpu-memory-utilization", "enforce-eager", "tensor-parallel-size")


def server_defaults(
    on_cpu: bool, knob_names: set[str], cpu_defaults: dict[str, Any], engine: EngineDefaults
) -> dict[str, Any]:
    """The defaults of the flags kvtune tunes (`knob_names`) that a candidate may leave out:
    V1's engine defaults, then the device's (`cpu_defaults`: the CPU build's, including what
    kvtune's own command fills in when a candidate sets nothing, e.g. the KV cache size; on
    GPUs the installed vLLM's EngineArgs defaults, `engine`)."""
    gpu = {"block-size": GPU_BLOCK_SIZE}
    gpu.update({k: engine.get(k) for k in GPU_READ_FLAGS if engine.get(k) is not None})
    known = {**V1_DEFAULTS, **(cpu_defaults if on_cpu else gpu)}
    return {k: v for k, v in known.items() if k in knob_names}
