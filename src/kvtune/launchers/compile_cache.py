"""vLLM's torch.compile cache in one folder per model, the same for every trial of a study.

A vLLM start on a GPU compiles the model (Inductor, Triton kernels) unless `--enforce-eager`; the
result is cached under ``$VLLM_CACHE_ROOT/torch_compile_cache/<hash>`` (vllm/compilation/
backends.py:1072-1076 in vLLM 0.32), the hash taken over the config, the code and the
environment, with VLLM_CACHE_ROOT itself left out of it (vllm/envs.py:2364, `compile_factors`).
So every trial of a study pointing at one root lets a repeat, a confirmation or a later config
with the same compile-relevant settings load its graphs instead of compiling them again, and the
root can be shared by every study of the same model without mixing anything up.

The root lives in kvtune's cache (`models.cache_dir()`), not in the run folder that users copy
around with their results, and it is set only on the servers kvtune itself starts: it is no part
of a config (not in the trial's env, not exported with the launch script). A VLLM_CACHE_ROOT the
user already set is kept.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Mapping

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
