"""llama-server's memory pre-screen: the target's weights, a draft model's, and the KV caches
of both must fit in what the machine has (the seeds' sums), before a config is launched.

Drafting with a second model (``--spec-type draft-simple``, or an older build's ``-md`` alone)
loads that GGUF beside the target and gives it a KV cache of its own: llama-server sizes the
draft's context to one slot's (``--ctx-size-draft`` unset: the target's --ctx-size / --parallel,
one sequence), at f16 unless ``--cache-type-k-draft``/``--cache-type-v-draft`` say otherwise.
Builds differ in how many draft contexts they make (one per slot in some servers, one shared in
others); the pre-screen charges one, the lower bound, because it errs towards launching: a config
it wrongly rejects is never measured, one it wrongly lets through fails at start-up and is
recorded as such.

Without this, a study with ``--draft-model`` pre-screened its drafting configs as if only the
target were loaded, and launched ones that could not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtune.launchers.llama_devices import VRAM_RESERVE_BYTES, prescreen_offload
from kvtune.planner.kv import ModelShape, kv_cache_bytes, llama_server_kv_tokens, prescreen_kv_fits

if TYPE_CHECKING:
    from kvtune.launchers.llama_server import LlamaServerLauncher

DRAFT_CACHE_FLAGS = ("cache-type-k-draft", "cache-type-v-draft")


def file_bytes(path: str) -> int | None:
    """A GGUF's size on disk, the weights it loads (None: not here to read)."""
    file = Path(path)
    return file.stat().st_size if file.exists() else None


@dataclass(frozen=True)
class DraftMemory:
    """What the draft model adds: its weights (the GGUF's size) and its KV cache, in bytes."""

    weights: int = 0
    kv: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.kv

    def describe(self) -> str:
        """For the pre-screen's reason: "draft model 0.10 GiB + its KV 0.02 GiB"."""
        return f"draft model {self.weights / 2**30:.2f} GiB + its KV {self.kv / 2**30:.2f} GiB"


def draft_memory(flags: dict[str, Any], draft_flag: str | None, shape: ModelShape | None, slot_ctx: int) -> DraftMemory:
    """The draft's memory for a candidate's `flags` (zero unless it drafts with the model named
    by `draft_flag`: the launcher sets that flag only beside drafting). `shape`: the draft's
    shape from its GGUF header (None: unread, its KV is not charged); `slot_ctx`: the target's
    context per slot, the draft's context."""
    path = flags.get(draft_flag) if draft_flag else None
    if not path:
        return DraftMemory()
    on_disk = file_bytes(str(path))
    weights = on_disk if on_disk is not None else (shape.weights_bytes if shape else None) or 0
    if shape is None or slot_ctx <= 0:
        return DraftMemory(weights=weights)
    cache = tuple(str(flags.get(name) or "f16") for name in DRAFT_CACHE_FLAGS)
    return DraftMemory(weights=weights, kv=kv_cache_bytes(shape, slot_ctx, (cache[0], cache[1]), sequences=1))


def memory_fits(lau: LlamaServerLauncher, f: dict[str, Any], ctx: int, parallel: int) -> str | None:
    """Weights + the KV cache this --ctx-size allocates must fit in memory: with -ngl set, VRAM
    and RAM as it splits them; unset on a build that fits automatically (-ngl auto, --fit on),
    RAM and the GPUs' free memory together. A draft model's weights and KV count as weights
    (with -ngl set, split as the target's layers are: an approximation). A one-line reason, or
    None (also when the model's shape or the memory is unknown: no pre-screen)."""
    if lau.shape is None or lau.memory_bytes is None:
        return None
    cache = (str(f.get("cache-type-k", "f16")), str(f.get("cache-type-v", "f16")))
    draft = draft_memory(f, lau.speculation.draft_model_flag, lau.draft_shape, ctx // max(parallel, 1))
    target = lau.weights_bytes()
    weights = (target if target is not None else lau.shape.weights_bytes or 0) + draft.total
    kv_tokens = llama_server_kv_tokens(ctx, parallel)
    if f.get("n-gpu-layers") is not None and lau.devices:
        main = f.get("main-gpu")
        reason = prescreen_offload(
            lau.shape,
            weights,
            lau.devices,
            ngl=int(f["n-gpu-layers"]),
            kv_tokens=kv_tokens,
            cache_type=cache,
            sequences=parallel,
            memory_bytes=lau.memory_bytes,
            ram_reserve_bytes=lau.reserve_bytes,
            split_mode=str(f.get("split-mode") or "layer"),
            main_gpu=int(main) if main is not None else 0,
            tensor_split=f.get("tensor-split"),
        )
    else:
        memory = lau.memory_bytes
        if lau.devices and lau.defaults.fits_automatically:  # unset -ngl: it offloads what fits
            memory += sum(max(0, d.free_bytes - VRAM_RESERVE_BYTES) for d in lau.devices)
        reason = prescreen_kv_fits(lau.shape, weights, memory, lau.reserve_bytes, kv_tokens, cache, sequences=parallel)
    return f"{reason} (weights include the {draft.describe()})" if reason and draft.total else reason
