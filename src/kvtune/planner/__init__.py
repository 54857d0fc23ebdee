"""KV-cache and bandwidth planning: what fits in memory and how fast one stream can decode.

`kv` holds the seeds' arithmetic (pure), `units` parses sizes and bandwidths, `shape` reads a
model's shape from an HF config.json or GGUF metadata, `gpus` turns the host's facts (read by
`kvtune.hardware`) into a memory/bandwidth budget with spec-sheet bandwidths, and `render` turns a Plan into text or a JSON-ready dict. The tuner uses
`prescreen_kv_fits` to skip launches that provably cannot fit; `kvtune plan` prints a Plan.
"""

from kvtune.planner.kv import (
    CACHE_TYPES,
    DEFAULT_CACHE_TYPES,
    CachePlan,
    ModelShape,
    Plan,
    SlotPlan,
    TableRow,
    decode_ceiling_tok_s,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    llama_server_kv_tokens,
    make_plan,
    prescreen_kv_fits,
    sequences_that_fit,
    slot_context,
    table,
)
from kvtune.planner.units import parse_bandwidth, parse_size

__all__ = [
    "CACHE_TYPES",
    "DEFAULT_CACHE_TYPES",
    "CachePlan",
    "ModelShape",
    "Plan",
    "SlotPlan",
    "TableRow",
    "decode_ceiling_tok_s",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "llama_server_kv_tokens",
    "make_plan",
    "parse_bandwidth",
    "parse_size",
    "prescreen_kv_fits",
    "sequences_that_fit",
    "slot_context",
    "table",
]
