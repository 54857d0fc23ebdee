"""Model shape from what is on disk: an HF folder's config.json, or a GGUF file's metadata.

This is the planner's I/O edge: it reads files and hands a plain `ModelShape` to the pure
arithmetic in kv.py. HF configs name things differently across families (Llama, Mixtral,
DeepSeek's MLA, Gemma's sliding windows, multimodal `text_config`), so each field tries the known
spellings in turn; GGUF uses llama.cpp's `{arch}.*` keys. Weights size comes from the files on
disk; parameter counts (total and, for MoE, active) from the GGUF tensors or, for HF, an estimate
from the config. A file that is missing, not a model, or lacks a needed key raises `ModelError`
with one line naming the file and the key.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from kvtune.errors import ModelError
from kvtune.gguf_file import is_gguf, read_gguf
from kvtune.planner.kv import ModelShape
from kvtune.readable import check_name_lengths, special_kind

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float8_e4m3fn": 1}
# llama.cpp's sliding-window layer patterns: every n-th layer is global, the others are windowed.
GGUF_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2}
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


def _first(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _need(cfg: dict[str, Any], where: Path, *keys: str) -> Any:
    value = _first(cfg, *keys)
    if value is None:
        raise ModelError(f"{where} has no {keys[0]}: cannot tell the model's shape")
    return value


# The config.json keys the shape reads as counts and sizes: the layers and attention heads must be
# at least 1 (the shape divides by the heads), the others 0 or more.
_AT_LEAST_ONE = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_attention_heads", "n_head", "n_heads")
_COUNTS = (
    *("num_key_value_heads", "n_head_kv", "num_kv_heads", "head_dim", "hidden_size", "n_embd", "d_model"),
    *("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts"),
    *("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "sliding_window", "sliding_window_pattern"),
    *("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank"),
    *("vocab_size", "intermediate_size", "ffn_dim"),
    *("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
)


def _check_sizes(cfg: dict[str, Any], where: Path) -> None:
    """Every count and size the shape reads is a whole number (0 or more; layers and heads 1 or
    more): a config.json with "big", NaN, 1e999 or a list there was an OverflowError or a
    TypeError from deep in the arithmetic; here one line naming the file and the key."""
    for key in (*_AT_LEAST_ONE, *_COUNTS):
        value = cfg.get(key)
        if value is None:
            continue
        least = 1 if key in _AT_LEAST_ONE else 0
        whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
        if isinstance(value, bool) or not whole or value < least:
            raise ModelError(
                f"{where} gives {key} {value!r}: expected a whole number of at least {least}; "
                "download or convert the model again"
            )


def _hf_sliding(cfg: dict[str, Any], layers: int) -> tuple[int | None, int]:
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        n = sum(1 for t in types[:layers] if "sliding" in str(t) or "chunked" in str(t))
        return (window, n) if window and n else (None, 0)
    if not window or cfg.get("use_sliding_window") is False:
        return None, 0
    model_type = str(cfg.get("model_type", ""))
    pattern = _first(cfg, "sliding_window_pattern", "_sliding_window_pattern")
    if model_type.startswith("gemma2"):
        pattern = 2
    if isinstance(pattern, int) and pattern > 0:
        return window, layers - layers // pattern
    if "max_window_layers" in cfg and model_type.startswith("qwen"):
        return window, max(0, layers - int(cfg["max_window_layers"]))
    return window, layers  # Mistral-7B-v0.1 style: every layer uses the window


def _hf_params(
    cfg: dict[str, Any], heads: int, kv_heads: int, head_dim: int, layers: int, experts: int | None, active: int | None
) -> tuple[int | None, int | None]:
    """Parameter estimate (total, active) from the config; None when the config lacks the sizes."""
    hidden, vocab = cfg.get("hidden_size"), cfg.get("vocab_size")
    inter = _first(cfg, "intermediate_size", "ffn_dim")
    if not (hidden and vocab and inter):
        return None, None
    if cfg.get("kv_lora_rank"):  # DeepSeek MLA projections
        rope, nope = cfg["qk_rope_head_dim"], cfg.get("qk_nope_head_dim", head_dim)
        v_dim, q_lora = cfg.get("v_head_dim", nope), cfg.get("q_lora_rank")
        q = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        attn = (
            q
            + hidden * (cfg["kv_lora_rank"] + rope)
            + cfg["kv_lora_rank"] * heads * (nope + v_dim)
            + heads * v_dim * hidden
        )
    else:
        attn = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    dense_mlp = 3 * hidden * inter
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    if not experts:
        total = layers * (attn + dense_mlp) + embed
        return total, total
    expert = 3 * hidden * _first(cfg, "moe_intermediate_size", default=inter)
    shared = 3 * hidden * (cfg.get("shared_expert_intermediate_size") or 0)
    shared += (cfg.get("n_shared_experts") or 0) * expert
    dense_layers = min(layers, cfg.get("first_k_dense_replace") or 0)
    moe_layers = layers - dense_layers
    base = layers * attn + dense_layers * dense_mlp + moe_layers * (shared + hidden * experts) + embed
    return base + moe_layers * experts * expert, base + moe_layers * (active or experts) * expert


def hf_weights_bytes(folder: Path) -> int | None:
    """Bytes of the weight files in an HF folder (the index's shards when there is one)."""
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = folder / index_name
        if index.is_file():
            try:
                files: set[str] = set(json.loads(index.read_text())["weight_map"].values())
            except (OSError, ValueError, KeyError, AttributeError) as e:
                raise ModelError(f"{index} is not a valid weights index: {e}") from e
            present = [folder / f for f in files if (folder / f).is_file()]
            if present:
                return sum(p.stat().st_size for p in present)
    for pattern in ("model*.safetensors", "*.safetensors", "pytorch_model*.bin"):
        found = sorted(folder.glob(pattern))
        if found:
            return sum(p.stat().st_size for p in found)
    return None


def shape_from_hf_config(path: str | Path) -> ModelShape:
    """ModelShape from an HF model folder or its config.json."""
    path = Path(path).expanduser()
    cfg_path = path / "config.json" if path.is_dir() else path
    if not cfg_path.is_file():
        raise ModelError(f"{cfg_path} does not exist: pass an HF model folder with a config.json")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ModelError(f"cannot read {cfg_path}: {e}") from e
    except json.JSONDecodeError as e:
        raise ModelError(f"{cfg_path} is not valid JSON (line {e.lineno}: {e.msg})") from e
    if not isinstance(cfg, dict):
        raise ModelError(f"{cfg_path} is not a model config (expected a JSON object)")
    if isinstance(cfg.get("text_config"), dict):  # multimodal: the language model's shape
        cfg = {**cfg, **cfg["text_config"]}
    _check_sizes(cfg, cfg_path)
    layers = int(_need(cfg, cfg_path, "num_hidden_layers", "n_layer", "num_layers", "n_layers"))
    heads = int(_need(cfg, cfg_path, "num_attention_heads", "n_head", "n_heads"))
    kv_heads = _first(cfg, "num_key_value_heads", "n_head_kv", "num_kv_heads")
    if kv_heads is None:
        kv_heads = 1 if cfg.get("multi_query") else heads  # HF default: multi-head attention
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        head_dim = int(_need(cfg, cfg_path, "hidden_size", "n_embd", "d_model")) // heads
    experts = _first(cfg, "num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
    experts = int(experts) if experts else None
    active = _first(cfg, "num_experts_per_tok", "num_experts_per_token", "moe_top_k") if experts else None
    window, swa_layers = _hf_sliding(cfg, layers)
    mla = cfg.get("kv_lora_rank")
    total, act = _hf_params(cfg, heads, int(kv_heads), int(head_dim), layers, experts, active)
    dtype = str(_first(cfg, "torch_dtype", "dtype", default="bfloat16")).replace("torch.", "")
    dtype_bytes = DTYPE_BYTES.get(dtype, 2)
    weights = hf_weights_bytes(cfg_path.parent)
    if weights is None and total:
        weights = total * dtype_bytes  # no weight files: estimate from the parameter count
    return ModelShape(
        layers=layers,
        attention_heads=heads,
        kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        dtype_bytes=dtype_bytes,
        max_positions=_first(cfg, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
        sliding_window=int(window) if window else None,
        sliding_window_layers=swa_layers,
        kv_lora_rank=int(mla) if mla else None,
        qk_rope_head_dim=int(cfg["qk_rope_head_dim"]) if mla else None,
        moe_experts_total=experts,
        moe_experts_active=int(active) if active else None,
        params_total=total,
        params_active=act,
        weights_bytes=weights,
        name=str(_first(cfg, "_name_or_path", default="") or cfg_path.parent.name),
    )


def _gguf_files(path: Path) -> list[Path]:
    """The file, or every shard of a split GGUF (name-00001-of-00003.gguf)."""
    m = _SPLIT.search(path.name)
    if not m:
        return [path]
    stem = path.name[: m.start()]
    return [path.with_name(f"{stem}-{i:05d}-of-{m.group(2)}.gguf") for i in range(1, int(m.group(2)) + 1)]


def shape_from_gguf(path: str | Path) -> ModelShape:
    """ModelShape from GGUF metadata (llama.cpp's {arch}.* keys) and the file's size."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"GGUF file {path} does not exist")
    if not is_gguf(path):
        raise ModelError(f"{path} is not a GGUF file")
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ModelError("reading GGUF metadata needs the gguf package: pip install gguf") from None
    try:
        reader = read_gguf(path)
    except Exception as e:  # the reader's own struct/value errors on a damaged file
        raise ModelError(f"cannot read GGUF metadata from {path}: {e}") from e

    def get(key: str) -> Any:  # GGUF metadata values are untyped
        field = reader.fields.get(key)
        if field is None:
            return None
        if hasattr(field, "contents"):  # gguf >= 0.11
            return field.contents()
        values = [field.parts[i] for i in field.data]  # older readers: raw parts
        if field.types and field.types[-1].name == "STRING":
            values = [bytes(v).decode("utf-8", "replace") for v in values]
        else:
            values = [v.tolist()[0] for v in values]
        return values if field.types[0].name == "ARRAY" else values[0]

    arch = get("general.architecture")
    if not arch:
        raise ModelError(f"{path} has no general.architecture: not a model GGUF")

    def need(key: str) -> Any:
        value = get(f"{arch}.{key}")
        if value is None:
            raise ModelError(f"{path} has no {arch}.{key}: cannot tell the model's shape")
        return value

    layers = int(need("block_count"))
    heads = need("attention.head_count")
    heads = max(heads) if isinstance(heads, list) else int(heads)
    kv = get(f"{arch}.attention.head_count_kv")
    kv = heads if kv is None else kv
    if isinstance(kv, list):  # per-layer counts; 0 = a layer without attention (hybrid models)
        kv_layers = [int(x) for x in kv[:layers] if x]
        layers, kv = len(kv_layers) or layers, max(kv_layers, default=heads)
    head_dim = get(f"{arch}.attention.key_length") or int(need("embedding_length")) // heads
    mla = get(f"{arch}.attention.kv_lora_rank")
    rope = get(f"{arch}.rope.dimension_count") if mla else None
    if mla and rope is None:
        raise ModelError(f"{path} has no {arch}.rope.dimension_count: cannot size its MLA cache")
    window = get(f"{arch}.attention.sliding_window")
    swa_layers = 0
    if window:
        pattern = get(f"{arch}.attention.sliding_window_pattern")
        if isinstance(pattern, list):
            swa_layers = sum(1 for x in pattern[:layers] if x)
        else:  # unknown arch: 0, so the cache is never under-estimated
            pattern = pattern or GGUF_SWA_PATTERN.get(arch)
            swa_layers = layers - layers // int(pattern) if pattern else 0
    files = _gguf_files(path)
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise ModelError(f"split GGUF {path.name} is missing shard {missing[0]}")
    tensors = list(reader.tensors)
    for shard in files:
        if shard.resolve() != path.resolve():
            try:
                tensors += GGUFReader(str(shard)).tensors
            except Exception as e:
                raise ModelError(f"cannot read GGUF shard {shard}: {e}") from e
    experts, used = get(f"{arch}.expert_count"), get(f"{arch}.expert_used_count")
    total = sum(int(t.n_elements) for t in tensors)
    in_experts = sum(int(t.n_elements) for t in tensors if "_exps" in t.name)  # ffn_{gate,up,down}_exps
    active = total - in_experts + in_experts * int(used) // int(experts) if experts and used else total
    return ModelShape(
        layers=layers,
        attention_heads=heads,
        kv_heads=int(kv),
        head_dim=int(head_dim),
        dtype_bytes=2,
        max_positions=get(f"{arch}.context_length"),
        sliding_window=int(window) if window and swa_layers else None,
        sliding_window_layers=swa_layers,
        kv_lora_rank=int(mla) if mla else None,
        qk_rope_head_dim=int(rope) if rope is not None else None,
        moe_experts_total=int(experts) if experts else None,
        moe_experts_active=int(used) if experts and used else None,
        params_total=total or None,
        params_active=active or None,
        weights_bytes=sum(f.stat().st_size for f in files),
        layer_weights_bytes=sum(int(t.n_bytes) for t in tensors if t.name.startswith("blk.")) or None,
        name=str(get("general.name") or path.stem),
    )


def shape_from_path(path: str | Path) -> ModelShape:
    """Dispatch: a .gguf file, a config.json, or an HF folder holding one. A path refused opens
    with the key it came in as, `model` (`kvtune plan` opens it with its --model flag)."""
    p = Path(path).expanduser()
    named = f"model {str(path)!r}"
    check_name_lengths(p, named, ModelError)  # else exists() raises 'File name too long'
    if not p.exists():
        raise ModelError(f"{named} does not exist: give a GGUF file or an HF model folder")
    if p.is_dir():
        if (p / "config.json").is_file():
            return shape_from_hf_config(p)
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) == 1:
            return shape_from_gguf(ggufs[0])
        raise ModelError(f"{named} is a folder with no config.json and not exactly one .gguf file: give the model file")
    kind = special_kind(p)  # a named pipe would block the read below, a device never end
    if kind is not None:
        raise ModelError(f"{named} is {kind}, not a file: give a GGUF file or an HF model folder")
    try:
        gguf = is_gguf(p)
    except OSError as e:
        raise ModelError(f"{named} cannot be read: {e.strerror}") from e
    if gguf:
        return shape_from_gguf(p)
    if p.suffix.lower() == ".gguf":
        raise ModelError(f"{named} is not a GGUF file (its first bytes are not GGUF's)")
    if p.suffix.lower() == ".json":
        return shape_from_hf_config(p)
    raise ModelError(f"{named} is neither a .gguf file nor an HF config.json")
