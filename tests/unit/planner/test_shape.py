"""Model shape from a real GGUF (the demo model), GGUFs written here, and published HF configs."""

from __future__ import annotations

import json

import pytest

from kvtune.errors import ModelError
from kvtune.launchers.models import demo_model_path
from kvtune.planner import decode_ceiling_tok_s, kv_bytes_per_sequence, kv_bytes_per_token
from kvtune.planner.shape import shape_from_gguf, shape_from_hf_config, shape_from_path

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")


@pytest.fixture(scope="module")
def demo_path():
    try:
        return demo_model_path(fetch=False)
    except ModelError as e:
        pytest.skip(f"demo model unavailable: {e}")


@pytest.fixture(scope="module")
def demo_shape(demo_path):
    return shape_from_gguf(demo_path)  # GGUFReader parses the whole vocabulary: read it once


def test_demo_gguf_shape(demo_path, demo_shape):
    shape = demo_shape
    assert (shape.layers, shape.attention_heads, shape.kv_heads, shape.head_dim) == (30, 9, 3, 64)
    assert shape.max_positions == 8192 and shape.dtype_bytes == 2
    assert shape.kv_lora_rank is None and shape.sliding_window_layers == 0 and shape.moe_experts_total is None
    assert shape.weights_bytes == demo_path.stat().st_size == 98362432
    assert shape.params_total == shape.params_active and 130e6 < shape.params_total < 140e6  # SmolLM2-135M
    assert kv_bytes_per_token(shape, "f16") == 2 * 30 * 3 * 64 * 2 == 23040


def test_demo_gguf_through_its_folder(demo_path, demo_shape, tmp_path):
    (tmp_path / demo_path.name).symlink_to(demo_path)
    assert shape_from_path(tmp_path) == demo_shape


def _write_gguf(path, arch, kv: dict, tensors: dict | None = None):
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in kv.items():
        if isinstance(value, list):
            w.add_array(key, value)
        else:
            w.add_uint32(key, value)
    for name, shape in (tensors or {"token_embd.weight": (4, 4)}).items():
        w.add_tensor(name, np.zeros(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_mla_and_moe(tmp_path):
    # DeepSeek-V2-Lite-like: 27 layers, MLA latent 512 + rope 64, 64 experts, 6 used.
    path = _write_gguf(
        tmp_path / "ds.gguf",
        "deepseek2",
        {
            "deepseek2.block_count": 27,
            "deepseek2.attention.head_count": 16,
            "deepseek2.attention.head_count_kv": 16,
            "deepseek2.embedding_length": 2048,
            "deepseek2.context_length": 163840,
            "deepseek2.attention.kv_lora_rank": 512,
            "deepseek2.rope.dimension_count": 64,
            "deepseek2.expert_count": 64,
            "deepseek2.expert_used_count": 6,
        },
        {"blk.0.ffn_up_exps.weight": (64, 4, 4), "blk.0.attn_q.weight": (4, 4)},
    )
    shape = shape_from_path(path)
    assert (shape.kv_lora_rank, shape.qk_rope_head_dim) == (512, 64)
    assert kv_bytes_per_token(shape, "f16") == (512 + 64) * 27 * 2
    assert (shape.moe_experts_total, shape.moe_experts_active) == (64, 6)
    assert shape.params_total == 64 * 16 + 16 and shape.params_active == 6 * 16 + 16


def test_gguf_sliding_window_pattern(tmp_path):
    path = _write_gguf(
        tmp_path / "g.gguf",
        "gemma2",
        {
            "gemma2.block_count": 42,
            "gemma2.attention.head_count": 16,
            "gemma2.attention.head_count_kv": 8,
            "gemma2.embedding_length": 3584,
            "gemma2.attention.key_length": 256,
            "gemma2.context_length": 8192,
            "gemma2.attention.sliding_window": 4096,
        },
    )
    shape = shape_from_gguf(path)
    assert shape.head_dim == 256 and shape.sliding_window == 4096 and shape.sliding_window_layers == 21


def test_gguf_per_layer_kv_heads_count_only_attention_layers(tmp_path):
    path = _write_gguf(
        tmp_path / "h.gguf",
        "hybrid",
        {
            "hybrid.block_count": 4,
            "hybrid.attention.head_count": 8,
            "hybrid.embedding_length": 512,
            "hybrid.attention.head_count_kv": [0, 2, 0, 2],
        },
    )
    shape = shape_from_gguf(path)
    assert (shape.layers, shape.kv_heads, shape.head_dim) == (2, 2, 64)


def test_gguf_missing_key_is_named(tmp_path):
    path = _write_gguf(tmp_path / "bad.gguf", "llama", {"llama.attention.head_count": 8})
    with pytest.raises(ModelError, match="has no llama.block_count"):
        shape_from_gguf(path)


def test_not_a_gguf(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ModelError, match="is not a GGUF file"):
        shape_from_path(fake)


# --- HF config.json (published values) -------------------------------------------------------------

LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
DEEPSEEK_V2 = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "hidden_size": 5120,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_hidden_layers": 60,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "n_routed_experts": 160,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "max_position_embeddings": 163840,
    "vocab_size": 102400,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 32000,
}
GEMMA2_9B = {
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "hidden_size": 3584,
    "head_dim": 256,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "sliding_window": 4096,
    "torch_dtype": "float32",
    "vocab_size": 256000,
}
MISTRAL_7B_V01 = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
    "torch_dtype": "bfloat16",
    "vocab_size": 32000,
}


def _folder(tmp_path, cfg, name="m"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_llama3_8b_config(tmp_path):
    shape = shape_from_path(_folder(tmp_path, LLAMA3_8B))
    assert (shape.layers, shape.attention_heads, shape.kv_heads, shape.head_dim) == (32, 32, 8, 128)
    assert shape.dtype_bytes == 2 and shape.max_positions == 8192 and shape.sliding_window_layers == 0
    assert kv_bytes_per_token(shape, "f16") == 131072
    assert kv_bytes_per_sequence(shape, 8192, "f16") == 2**30
    assert shape.params_total == pytest.approx(8.03e9, rel=0.01)  # published: 8.03B
    # No weight files: estimated at 2 bytes per parameter, about the seeds' "16 GB fp16 model".
    assert shape.weights_bytes == shape.params_total * 2
    assert round(decode_ceiling_tok_s(1e12, shape.weights_bytes), -1) == 60


def test_weights_size_from_files(tmp_path):
    d = _folder(tmp_path, LLAMA3_8B)
    (d / "model-00001-of-00002.safetensors").write_bytes(b"x" * 1000)
    (d / "model-00002-of-00002.safetensors").write_bytes(b"x" * 500)
    (d / "consolidated.safetensors").write_bytes(b"x" * 1500)  # Mistral-style duplicate, not in the index
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
    )
    assert shape_from_hf_config(d).weights_bytes == 1500
    (d / "model.safetensors.index.json").unlink()
    assert shape_from_hf_config(d / "config.json").weights_bytes == 1500  # model*.safetensors only


def test_deepseek_v2_mla_config(tmp_path):
    shape = shape_from_path(_folder(tmp_path, DEEPSEEK_V2) / "config.json")
    assert (shape.kv_lora_rank, shape.qk_rope_head_dim, shape.layers) == (512, 64, 60)
    assert kv_bytes_per_token(shape, "bf16") == (512 + 64) * 60 * 2 == 69120
    assert (shape.moe_experts_total, shape.moe_experts_active) == (160, 6)
    assert shape.params_total == pytest.approx(236e9, rel=0.02)  # published: 236B total
    assert shape.params_active == pytest.approx(21e9, rel=0.03)  # published: 21B active


def test_mixtral_moe_config(tmp_path):
    d = _folder(tmp_path, MIXTRAL_8X7B)
    (d / "model.safetensors").write_bytes(b"x" * 4670)
    shape = shape_from_path(d)
    assert (shape.moe_experts_total, shape.moe_experts_active) == (8, 2)
    assert shape.sliding_window is None and shape.sliding_window_layers == 0
    assert shape.params_total == pytest.approx(46.7e9, rel=0.01)  # published: 46.7B
    assert shape.params_active == pytest.approx(12.9e9, rel=0.01)  # published: 12.9B
    assert shape.weights_bytes == 4670
    assert shape.weights_active_bytes == pytest.approx(1290, rel=0.01)
    assert kv_bytes_per_token(shape) == 131072


def test_gemma2_sliding_window_config(tmp_path):
    shape = shape_from_path(_folder(tmp_path, GEMMA2_9B))
    assert shape.head_dim == 256 and shape.dtype_bytes == 4
    assert shape.sliding_window == 4096 and shape.sliding_window_layers == 21
    per_layer = 2 * 8 * 256 * 2
    assert kv_bytes_per_sequence(shape, 8192, "f16") == per_layer * (21 * 8192 + 21 * 4096)


def test_other_sliding_window_conventions(tmp_path):
    mistral = shape_from_path(_folder(tmp_path, MISTRAL_7B_V01, "mistral"))
    assert (mistral.sliding_window, mistral.sliding_window_layers) == (4096, 32)
    gemma3 = {
        **LLAMA3_8B,
        "model_type": "gemma3_text",
        "num_hidden_layers": 6,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    }
    assert shape_from_path(_folder(tmp_path, gemma3, "g3")).sliding_window_layers == 5
    qwen2 = {**LLAMA3_8B, "model_type": "qwen2", "sliding_window": 32768, "use_sliding_window": False}
    assert shape_from_path(_folder(tmp_path, qwen2, "q2")).sliding_window_layers == 0


def test_multimodal_text_config_and_mha_default(tmp_path):
    cfg = {"model_type": "llava", "text_config": {k: v for k, v in LLAMA3_8B.items() if k != "num_key_value_heads"}}
    shape = shape_from_path(_folder(tmp_path, cfg))
    assert shape.layers == 32 and shape.kv_heads == 32  # no num_key_value_heads: multi-head attention


def test_hf_errors_are_one_line(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        shape_from_path(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        shape_from_path(empty)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        shape_from_path(bad)
    no_layers = {k: v for k, v in LLAMA3_8B.items() if k != "num_hidden_layers"}
    with pytest.raises(ModelError, match="has no num_hidden_layers") as e:
        shape_from_path(_folder(tmp_path, no_layers, "nl"))
    assert "\n" not in str(e.value)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelError, match="neither a .gguf file nor an HF config.json"):
        shape_from_path(tmp_path / "notes.txt")


def test_split_gguf_counts_every_shard(tmp_path):
    kv = {"llama.block_count": 2, "llama.attention.head_count": 4, "llama.embedding_length": 64}
    first = _write_gguf(tmp_path / "m-00001-of-00002.gguf", "llama", kv, {"a.weight": (4, 4)})
    second = _write_gguf(tmp_path / "m-00002-of-00002.gguf", "llama", {}, {"b.weight": (8, 4)})
    shape = shape_from_path(first)
    assert shape.params_total == 16 + 32
    assert shape.weights_bytes == first.stat().st_size + second.stat().st_size
    second.unlink()
    with pytest.raises(ModelError, match="missing shard m-00002-of-00002.gguf"):
        shape_from_path(first)
