"""vLLM's torch.compile cache in one folder per model, the same for every trial of a study.

A vLLM start on a GPU compiles the model (Inductor, Triton kernels) unless `--enforce-eager`; the
result is cached under ``$VLLM_CACHE_ROOT/torch_compile_cache/<hash>`` (vllm/compilation/
backends.py:1072-1076 in vLLM 0.32), the hash taken over the config, the code and the
environment, with VLLM_CACHE_ROOT itself left out of it (vllm/envs.py:2364, `compile_factors`).
So every trial of a study pointing at one root lets a repeat, a confirmation or a later config
with the same compile-relevant settings load its graphs instead of compiling them again, and the
root can be shared by every study of the same model without mixing anything up. Nothing ever
wipes it: a confirmation's fresh runs of a config load the graphs its search trial compiled.

Which configs share compiled graphs (`compile_key`) decides how many compiles a study pays: on a
GPU a cold start is about 60-90 s, a cached one 35-55 s (vLLM PRs #11005, #20264). Trials the
study queues (warm start, informed start) run in `in_compile_order`, so configs that share a key
follow each other; whether a start-up was a hit is read from the server's log
(launchers/startup_log.py) into the trial's time record (study/time_spent.py).

The root lives in kvtune's cache (`models.cache_dir()`), not in the run folder that users copy
around with their results, and it is set only on the servers kvtune itself starts: it is no part
of a config (not in the trial's env, not exported with the launch script). A VLLM_CACHE_ROOT the
user already set is kept.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

CACHE_ROOT_VAR = "VLLM_CACHE_ROOT"  # vllm/envs.py:711-716 (default ~/.cache/vllm)


def compile_cache_root(model: str, cache_dir: Path) -> Path:
    """The folder for `model` (an HF folder or a hub id): its name, readable, and a hash of the
    whole path, so two models of the same name in different folders do not share one."""
    key = model.rstrip("/") or model
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(key).name or key).strip("_") or "model"
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return cache_dir / "vllm-compile" / f"{name}-{digest}"


def compile_cache_env(model: str, environ: Mapping[str, str], cache_dir: Path) -> dict[str, str]:
    """{VLLM_CACHE_ROOT: the model's folder}, or {} when `environ` already sets it."""
    if environ.get(CACHE_ROOT_VAR):
        return {}
    return {CACHE_ROOT_VAR: str(compile_cache_root(model, cache_dir))}


# ---- which configs share compiled graphs ------------------------------------------------------------
# Flags vLLM leaves out of its compile hash (vLLM 0.32: CacheConfig.compute_hash's
# `ignored_factors`, vllm/config/cache.py:288-315; SchedulerConfig.compute_hash hashes only
# max_num_batched_tokens and max_num_seqs, vllm/config/scheduler.py:255-283; ModelConfig's
# `ignored_factors`, vllm/config/model.py:464-500): configs that differ only in these load the
# same compiled graphs. Every other flag and every environment variable counts (vllm/envs.py
# `compile_factors` hashes most of the environment): a flag not listed here can only split a
# group, never make a compile look free that is not.
COMPILE_NEUTRAL_FLAGS = frozenset(
    {
        "gpu-memory-utilization",
        "kv-cache-memory-bytes",
        "num-gpu-blocks-override",
        "enable-prefix-caching",
        "prefix-caching-hash-algo",
        "enable-chunked-prefill",
        "max-num-partial-prefills",
        "max-long-partial-prefills",
        "long-prefill-token-threshold",
        "scheduling-policy",
        "seed",
        "served-model-name",
        "disable-cascade-attn",
    }
)
EAGER_FLAG = "enforce-eager"  # no torch.compile and no CUDA graphs: nothing to cache


def compile_key(flags: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """What a vLLM config's compiled graphs depend on among its flags and environment, as one
    string (equal strings: the second start loads what the first compiled); None for an eager
    config, which compiles nothing."""
    if flags.get(EAGER_FLAG) is True:
        return None
    kept = {k: v for k, v in flags.items() if k not in COMPILE_NEUTRAL_FLAGS}
    return repr((sorted(kept.items(), key=lambda kv: kv[0]), sorted(env.items())))


T = TypeVar("T")


def in_compile_order(configs: Sequence[T], key_of: Callable[[T], str | None], first: str | None = None) -> list[T]:
    """`configs` reordered so that those sharing a compile key run one after another: groups in
    the order their first member came, the group of `first` (the key compiled last) leading;
    within a group, and for configs that compile nothing (None), the given order. Configs are
    only moved, never dropped or added."""
    groups: dict[str | None, list[T]] = {}
    for c in configs:
        groups.setdefault(key_of(c), []).append(c)
    order = sorted(groups, key=lambda k: 0 if (first is not None and k == first) else 1)  # stable
    return [c for k in order for c in groups[k]]
