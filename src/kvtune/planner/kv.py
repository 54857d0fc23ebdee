"""The seeds' KV-cache arithmetic as functions: bytes per token, per sequence, what fits, how fast.

A server's memory holds the weights, a reserve (activations, CUDA context, fragmentation) and the
KV cache; the cache decides how many conversations can be served, and memory bandwidth bounds how
fast one of them decodes. Everything here is pure and deterministic so the tuner can call it to
skip launches that provably cannot fit, and the CLI can print it as `kvtune plan`. Bytes per token
= 2 (K and V) x layers x KV heads x head dim x bytes per element; MLA models (DeepSeek-V2/V3)
cache one compressed latent of kv_lora_rank + qk_rope_head_dim per layer instead (no factor 2, no
heads); sliding-window layers never hold more than the window. llama.cpp's quantized caches are
stored in blocks of 32 elements plus one fp16 scale: q8_0 = 32 int8 + 2 = 34 bytes per 32 elements,
q4_0 = 16 + 2 = 18 bytes per 32 elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Union

from kvtune.errors import SpecError

CACHE_TYPES: dict[str, float] = {
    "f32": 4,
    "fp32": 4,
    "float32": 4,
    "f16": 2,
    "fp16": 2,
    "float16": 2,
    "bf16": 2,
    "bfloat16": 2,
    "auto": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    # llama.cpp block formats: 32 elements per block + fp16 scale (and fp16 min for the _1 kinds).
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
# One type for K and V ("q8_0"), "K/V" ("q8_0/f16"), or a (K, V) pair.
CacheType = Union[str, tuple[str, str], list[str]]
DEFAULT_CACHE_TYPES = ("f16", "fp8", "q8_0", "q4_0")
TABLE_TOKENS = (4096, 32768, 131072)
TABLE_USERS = (1, 4)
LLAMA_CTX_PAD = 256  # llama.cpp pads n_ctx and the per-slot context to multiples of 256


@dataclass(frozen=True)
class ModelShape:
    """What the KV arithmetic needs to know about a model. `layers` counts layers that hold KV."""

    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2
    max_positions: int | None = None
    sliding_window: int | None = None
    sliding_window_layers: int = 0
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    moe_experts_total: int | None = None
    moe_experts_active: int | None = None
    params_total: int | None = None
    params_active: int | None = None
    weights_bytes: int | None = None
    layer_weights_bytes: int | None = None  # the repeating blocks' share (GGUF blk.*): what -ngl moves
    name: str = ""

    def __post_init__(self) -> None:
        for key in ("layers", "attention_heads", "kv_heads", "head_dim"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SpecError(f"model {key} must be a positive integer, got {value!r}")
        if not 0 <= self.sliding_window_layers <= self.layers:
            raise SpecError(f"sliding_window_layers {self.sliding_window_layers} is not in 0..{self.layers}")
        if self.sliding_window_layers and not (self.sliding_window and self.sliding_window > 0):
            raise SpecError("sliding_window_layers is set but sliding_window is not a positive token count")
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise SpecError("MLA needs both kv_lora_rank and qk_rope_head_dim")

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def weights_active_bytes(self) -> int | None:
        """Weights read per decoded token: MoE models read only the active experts."""
        if self.weights_bytes is None:
            return None
        if self.params_total and self.params_active and self.params_active < self.params_total:
            return int(round(self.weights_bytes * self.params_active / self.params_total))
        return self.weights_bytes


def bytes_per_element(cache_type: str, shape: ModelShape | None = None) -> float:
    """Bytes one cached element takes; "auto" follows the model dtype as vLLM does."""
    key = str(cache_type).strip().lower()
    if key == "auto" and shape is not None:
        return float(shape.dtype_bytes)
    if key not in CACHE_TYPES:
        raise SpecError(f"unknown cache type {cache_type!r}: expected one of {', '.join(CACHE_TYPES)}")
    return float(CACHE_TYPES[key])


def _kv_types(cache_type: CacheType) -> tuple[str, str]:
    if isinstance(cache_type, (tuple, list)):
        if len(cache_type) != 2:
            raise SpecError(f"cache type pair {cache_type!r} must be (K type, V type)")
        return str(cache_type[0]), str(cache_type[1])
    text = str(cache_type)
    if "/" in text:  # "q8_0/f16" = K q8_0, V f16
        k, _, v = text.partition("/")
        return k, v
    return text, text


def cache_label(cache_type: CacheType) -> str:
    k, v = _kv_types(cache_type)
    return k if k == v else f"{k}/{v}"


def _row_bytes(elements: int, bpe: float) -> int:
    """Bytes of one row of `elements`; block formats round up to whole blocks of 32."""
    if bpe != int(bpe):
        return math.ceil(elements / 32) * round(bpe * 32)
    return int(elements * bpe)


def layer_bytes_per_token(shape: ModelShape, cache_type: CacheType = "f16") -> int:
    """K + V bytes one token takes in one layer. `cache_type` (here and below) is one type for
    K and V, a (K, V) pair, or "K/V" such as "q8_0/f16", as llama-server takes them."""
    k, v = _kv_types(cache_type)
    if shape.kv_lora_rank is not None and shape.qk_rope_head_dim is not None:  # MLA: one latent
        # (compressed KV + rope key) per layer, stored as K
        return _row_bytes(shape.kv_lora_rank + shape.qk_rope_head_dim, bytes_per_element(k, shape))
    row = shape.kv_heads * shape.head_dim
    return _row_bytes(row, bytes_per_element(k, shape)) + _row_bytes(row, bytes_per_element(v, shape))


def kv_bytes_per_token(shape: ModelShape, cache_type: CacheType = "f16") -> int:
    """Bytes one more token adds to the cache over all layers (no sliding-window cap)."""
    return shape.layers * layer_bytes_per_token(shape, cache_type)


def kv_bytes_per_sequence(shape: ModelShape, context: int, cache_type: CacheType = "f16") -> int:
    """Bytes one sequence of `context` tokens holds; sliding-window layers hold at most the window."""
    if context < 0:
        raise SpecError(f"context {context} is negative")
    per_layer = layer_bytes_per_token(shape, cache_type)
    full = shape.layers - shape.sliding_window_layers
    swa_tokens = min(context, shape.sliding_window or context)
    return per_layer * (full * context + shape.sliding_window_layers * swa_tokens)


def sequences_that_fit(memory: int, weights: int, reserve: int, per_seq: int) -> int:
    """Full sequences that fit in what is left after weights and reserve (0 when nothing is left)."""
    if per_seq <= 0:
        raise SpecError(f"bytes per sequence must be positive, got {per_seq}")
    free = memory - weights - reserve
    return max(0, free // per_seq) if free > 0 else 0


@dataclass(frozen=True)
class TableRow:
    tokens: int
    users: int
    bytes: tuple[int, ...]  # one per cache type, in the order asked


def table(
    shape: ModelShape,
    tokens_list: Iterable[int] = TABLE_TOKENS,
    users_list: Iterable[int] = TABLE_USERS,
    cache_types: Iterable[CacheType] = ("f16",),
) -> list[TableRow]:
    """The seeds' table: every (tokens, users) pair -> KV bytes, for each cache type."""
    return [
        TableRow(t, u, tuple(u * kv_bytes_per_sequence(shape, t, c) for c in cache_types))
        for t in tokens_list
        for u in users_list
    ]


def _pad(n: int, to: int = LLAMA_CTX_PAD) -> int:
    return (n + to - 1) // to * to


def slot_context(ctx_size: int, parallel: int, unified: bool = False, pad: bool = False) -> int:
    """Tokens each llama-server slot gets from --ctx-size shared by --parallel slots.

    Unified KV lets one slot use the whole context. With `pad=True` it mirrors llama.cpp's own
    rounding (both n_ctx and the per-slot context rounded up to 256: 5000/3 -> 1792)."""
    if ctx_size <= 0 or parallel <= 0:
        raise SpecError(f"--ctx-size {ctx_size} and --parallel {parallel} must be positive")
    if unified:
        return _pad(ctx_size) if pad else ctx_size
    return _pad(_pad(ctx_size) // parallel) if pad else ctx_size // parallel


def llama_server_kv_tokens(ctx_size: int, parallel: int, unified: bool = False) -> int:
    """KV cells llama-server allocates for --ctx-size/--parallel (llama.cpp's padding included)."""
    per_slot = slot_context(ctx_size, parallel, unified, pad=True)
    return per_slot if unified else per_slot * parallel


def decode_ceiling_tok_s(bandwidth_bytes_s: float, weights_active_bytes: int, kv_bytes_read: int = 0) -> float:
    """Single-stream decode bound: every token reads the active weights and the sequence's KV once."""
    total = weights_active_bytes + kv_bytes_read
    if bandwidth_bytes_s <= 0 or total <= 0:
        raise SpecError("decode ceiling needs a positive bandwidth and a positive number of bytes read")
    return bandwidth_bytes_s / total


def kv_cache_bytes(shape: ModelShape, total_kv_tokens: int, cache_type: CacheType = "f16", sequences: int = 1) -> int:
    """Bytes a server's cache of `total_kv_tokens` cells takes over all layers, sliding-window
    layers charged at most window x `sequences` tokens (a lower bound on any server's)."""
    per_layer = layer_bytes_per_token(shape, cache_type)
    full = shape.layers - shape.sliding_window_layers
    swa = min(total_kv_tokens, (shape.sliding_window or 0) * max(1, sequences))
    return per_layer * (full * total_kv_tokens + shape.sliding_window_layers * swa)


def prescreen_kv_fits(
    shape: ModelShape,
    weights_bytes: int | None,
    memory_bytes: int,
    reserve_bytes: int,
    total_kv_tokens: int,
    cache_type: CacheType = "f16",
    sequences: int = 1,
) -> str | None:
    """A one-line reason when weights + reserve + KV for `total_kv_tokens` cannot fit, else None.

    Errs towards None: sliding-window layers are charged at most window x `sequences` tokens,
    which is a lower bound on what any server allocates for them."""
    weights = shape.weights_bytes if weights_bytes is None else weights_bytes
    weights = weights or 0
    kv = kv_cache_bytes(shape, total_kv_tokens, cache_type, sequences)
    need = weights + reserve_bytes + kv
    if need <= memory_bytes:
        return None

    def g(n: float) -> str:
        return f"{n / 2**30:.2f} GiB"

    return (
        f"weights {g(weights)} + reserve {g(reserve_bytes)} + KV {g(kv)} ({total_kv_tokens} tokens, "
        f"{cache_label(cache_type)}) = {g(need)} > memory {g(memory_bytes)}"
    )


@dataclass(frozen=True)
class CachePlan:
    """The figures for one cache type."""

    cache_type: str
    bytes_per_element: float
    bytes_per_token: int
    bytes_per_sequence: int  # at the plan's context
    bytes_for_users: int  # bytes_per_sequence x users
    sequences_fit: int | None  # full-context sequences that fit (None: memory unknown)
    decode_ceiling_tok_s: float | None  # one stream at full context (None: bandwidth or weights unknown)


@dataclass(frozen=True)
class SlotPlan:
    """What llama-server does with --ctx-size = context and --parallel = parallel."""

    ctx_size: int
    parallel: int
    per_slot: int  # --ctx-size / --parallel, as the seeds state it
    per_slot_llama: int  # after llama.cpp's rounding to 256
    ctx_size_for_full_context: int  # --ctx-size that gives every slot the full context


@dataclass(frozen=True)
class Plan:
    shape: ModelShape
    context: int
    users: int
    cache_types: tuple[str, ...]
    caches: tuple[CachePlan, ...]
    table_tokens: tuple[int, ...]
    table_users: tuple[int, ...]
    table: tuple[TableRow, ...]
    memory_bytes: int | None = None
    reserve_bytes: int = 0
    weights_bytes: int | None = None
    weights_active_bytes: int | None = None
    free_for_kv_bytes: int | None = None
    bandwidth_bytes_s: float | None = None
    decode_ceiling_weights_only: float | None = None
    slots: SlotPlan | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def make_plan(
    shape: ModelShape,
    memory_bytes: int | None = None,
    reserve_bytes: int = 0,
    context: int | None = None,
    users: int = 1,
    cache_types: Iterable[str] = DEFAULT_CACHE_TYPES,
    bandwidth: float | None = None,
    parallel: int | None = None,
    *,
    weights_bytes: int | None = None,
    table_tokens: Iterable[int] | None = None,
    table_users: Iterable[int] | None = None,
) -> Plan:
    """Everything `kvtune plan` prints. `weights_bytes` overrides the shape's (--weights)."""
    if weights_bytes is not None:
        shape = replace(shape, weights_bytes=weights_bytes)
    context = context or shape.max_positions
    if not context or context <= 0:
        raise SpecError("no context length: pass --context (the model does not state its maximum)")
    if users <= 0:
        raise SpecError(f"--users must be positive, got {users}")
    cache_types = tuple(cache_label(c) for c in cache_types) or DEFAULT_CACHE_TYPES
    notes = []
    if shape.max_positions and context > shape.max_positions:
        notes.append(f"context {context} exceeds the model's maximum of {shape.max_positions} positions")
    weights, active = shape.weights_bytes, shape.weights_active_bytes
    if weights is None:
        notes.append("weights size unknown: pass --weights; fits assume 0 bytes of weights")
    free = None
    if memory_bytes is not None:
        free = memory_bytes - (weights or 0) - reserve_bytes
        if free <= 0:
            notes.append("weights + reserve do not fit in memory: no room for any KV cache")
    ceiling0 = decode_ceiling_tok_s(bandwidth, active) if bandwidth and active else None
    caches = []
    for ct in cache_types:
        per_tok = kv_bytes_per_token(shape, ct)
        per_seq = kv_bytes_per_sequence(shape, context, ct)
        fit = None if memory_bytes is None else sequences_that_fit(memory_bytes, weights or 0, reserve_bytes, per_seq)
        ceiling = decode_ceiling_tok_s(bandwidth, active, per_seq) if bandwidth and active else None
        k, _ = _kv_types(ct)
        caches.append(CachePlan(ct, bytes_per_element(k, shape), per_tok, per_seq, per_seq * users, fit, ceiling))
    if caches[0].sequences_fit is not None and caches[0].sequences_fit < users:
        notes.append(f"{users} users at {context} tokens do not fit with a {caches[0].cache_type} cache")
    if table_tokens:
        tokens = tuple(table_tokens)
    else:  # the seeds' rows the model can hold, plus the plan's context
        limit = max(shape.max_positions or context, context)
        tokens = tuple(sorted({t for t in TABLE_TOKENS if t <= limit} | {context}))
    users_t = tuple(table_users) if table_users else tuple(sorted(set(TABLE_USERS) | {users}))
    slots = None
    if parallel:
        slots = SlotPlan(
            context,
            parallel,
            slot_context(context, parallel),
            slot_context(context, parallel, pad=True),
            context * parallel,
        )
    return Plan(
        shape=shape,
        context=context,
        users=users,
        cache_types=cache_types,
        caches=tuple(caches),
        table_tokens=tokens,
        table_users=users_t,
        table=tuple(table(shape, tokens, users_t, cache_types)),
        memory_bytes=memory_bytes,
        reserve_bytes=reserve_bytes,
        weights_bytes=weights,
        weights_active_bytes=active,
        free_for_kv_bytes=free,
        bandwidth_bytes_s=bandwidth,
        decode_ceiling_weights_only=ceiling0,
        slots=slots,
        notes=tuple(notes),
    )
