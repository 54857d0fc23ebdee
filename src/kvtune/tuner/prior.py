"""An informed first guess, measured right after the baseline.

Random start-up trials spend much of a short study on configs an operator would never pick
(one thread on a many-core box, far fewer slots than users). Before the sampler explores, kvtune
measures the configuration the seeds' advice points to: as many sequences as users, the smallest
context that holds a request, every core, flash attention, continuous batching, an unquantized
KV cache. TPE then starts from a good point instead of only from the defaults. Pure.
"""

from __future__ import annotations

from typing import Any

from kvtune.bench.workload import Workload
from kvtune.launchers.base import Knob

# flag -> value when that value is among the knob's choices
PREFERRED = {
    "flash-attn": "on", "cont-batching": True, "enable-chunked-prefill": True,
    "cache-type-k": "f16", "cache-type-v": "f16", "kv-cache-dtype": "auto",
    "batch-size": 2048, "ubatch-size": 512, "max-num-batched-tokens": 2048,
    "block-size": 128, "gpu-memory-utilization": 0.9, "env:VLLM_CPU_OMP_THREADS_BIND": "auto",
}


def _at_least(choices: tuple, n: int) -> Any:
    fitting = sorted(c for c in choices if isinstance(c, (int, float)) and c >= n)
    return fitting[0] if fitting else max(choices)


def informed_start(knobs: list[Knob], workload: Workload) -> dict[str, Any]:
    """Parameters (only for tuned knobs, only valid values) of the first informed guess."""
    params: dict[str, Any] = {}
    for k in knobs:
        if k.kind == "fixed":
            continue
        if k.name in ("parallel", "max-num-seqs") and k.kind == "choices":
            params[k.name] = _at_least(k.choices, workload.concurrency)
        elif k.name in ("ctx-per-slot", "max-model-len") and k.kind == "choices":
            params[k.name] = min(k.choices)
        elif k.name == "kv-cache-memory-bytes" and k.kind == "choices":
            params[k.name] = max(k.choices)
        elif k.name == "enable-prefix-caching" and k.kind == "choices":
            params[k.name] = workload.shared_prefix_fraction > 0
        elif k.name == "threads" and k.kind == "int":
            params[k.name] = int(k.high)
        elif k.name in PREFERRED and k.kind == "choices" and PREFERRED[k.name] in k.choices:
            params[k.name] = PREFERRED[k.name]
    return params
