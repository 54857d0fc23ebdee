"""The planner's arithmetic reproduces the seed documents' figures exactly."""

from __future__ import annotations

import json

import pytest

from kvtune.errors import SpecError
from kvtune.hardware import detect_hardware
from kvtune.planner import (
    CACHE_TYPES,
    ModelShape,
    decode_ceiling_tok_s,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    llama_server_kv_tokens,
    make_plan,
    parse_bandwidth,
    parse_size,
    prescreen_kv_fits,
    sequences_that_fit,
    slot_context,
    table,
)
from kvtune.planner.gpus import CpuRam, GpuInfo, bandwidth_for, hardware_budget, nvlink_bandwidth_for, pcie_bandwidth
from kvtune.planner.plan_text import plan_to_dict, render

GiB = 2**30
# Llama-3-8B as the seeds state it: 32 layers, 32 heads, 8 KV heads, head dim 4096 / 32 = 128.
LLAMA3_8B = ModelShape(
    layers=32, attention_heads=32, kv_heads=8, head_dim=4096 // 32, max_positions=8192, name="Llama-3-8B"
)
# DeepSeek-V2: 60 layers, MLA latent kv_lora_rank 512 + qk_rope_head_dim 64.
DEEPSEEK_V2 = ModelShape(
    layers=60,
    attention_heads=128,
    kv_heads=128,
    head_dim=192,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    moe_experts_total=160,
    moe_experts_active=6,
)
# Gemma-2-9B: 42 layers, 8 KV heads of 256, every other layer windowed at 4096 tokens.
GEMMA2_9B = ModelShape(
    layers=42, attention_heads=16, kv_heads=8, head_dim=256, sliding_window=4096, sliding_window_layers=21
)


# --- the seeds' figures ---------------------------------------------------------------------


def test_llama3_8b_fp16_is_128_kib_per_token():
    assert kv_bytes_per_token(LLAMA3_8B, "f16") == 131072
    assert kv_bytes_per_token(LLAMA3_8B, "f16") // 1024 == 128
    for alias in ("fp16", "bf16", "auto", "float16"):
        assert kv_bytes_per_token(LLAMA3_8B, alias) == 131072


def test_8192_tokens_is_one_gib():
    assert kv_bytes_per_sequence(LLAMA3_8B, 8192, "f16") == GiB


def test_24_gib_card_fits_7_sequences():
    per_seq = kv_bytes_per_sequence(LLAMA3_8B, 8192, "f16")
    assert sequences_that_fit(24 * GiB, 15 * GiB, 2 * GiB, per_seq) == 7
    assert sequences_that_fit(parse_size("24GiB"), parse_size("15GiB"), parse_size("2GiB"), per_seq) == 7
    plan = make_plan(LLAMA3_8B, 24 * GiB, 2 * GiB, 8192, cache_types=["f16"], weights_bytes=15 * GiB)
    assert plan.caches[0].sequences_fit == 7
    assert plan.free_for_kv_bytes == 7 * GiB


def test_double_context_halves_and_8bit_cache_doubles_back():
    # "Double the context and you halve the concurrency. Quantise the cache to 8 bits and you double it back."
    fit = lambda ctx, ct: sequences_that_fit(
        24 * GiB,
        15 * GiB,
        2 * GiB,  # noqa: E731
        kv_bytes_per_sequence(LLAMA3_8B, ctx, ct),
    )
    assert fit(16384, "f16") == 3  # 7 GiB / 2 GiB, floored
    assert fit(16384, "fp8") == 7


def test_tokens_by_users_table():
    rows = table(LLAMA3_8B, (4096, 32768, 131072), (1, 4), ("f16",))
    assert [(r.tokens, r.users) for r in rows] == [
        (4096, 1),
        (4096, 4),
        (32768, 1),
        (32768, 4),
        (131072, 1),
        (131072, 4),
    ]
    assert [r.bytes[0] / GiB for r in rows] == [0.5, 2.0, 4.0, 16.0, 16.0, 64.0]


def test_decode_ceiling_16_gb_on_1_tb_s_is_about_60():
    tok_s = decode_ceiling_tok_s(parse_bandwidth("1TB/s"), parse_size("16GB"))
    assert tok_s == 62.5
    assert round(tok_s, -1) == 60
    # Reading KV as well lowers it: 1 GiB of cache at full context.
    assert decode_ceiling_tok_s(1e12, 16e9, GiB) < tok_s


def test_slot_context_is_ctx_size_over_parallel():
    assert slot_context(16384, 4) == 4096  # the seeds' gotcha
    assert slot_context(32768, 4) == 8192  # the seeds' llama-server example
    assert slot_context(16384, 4, unified=True) == 16384


def test_slot_context_mirrors_llama_cpp_padding():
    # Observed with llama-server (llama_context: n_ctx / n_ctx_seq): 5000/3 -> 1792 per slot, 5376 cells.
    assert slot_context(5000, 3, pad=True) == 1792
    assert llama_server_kv_tokens(5000, 3) == 5376
    assert llama_server_kv_tokens(4096, 2) == 4096
    assert llama_server_kv_tokens(1000, 1) == 1024
    assert llama_server_kv_tokens(100, 4) == 1024
    with pytest.raises(SpecError):
        slot_context(4096, 0)


# --- cache types ------------------------------------------------------------------------------


def test_cache_type_sizes():
    assert CACHE_TYPES["q8_0"] == 34 / 32 and CACHE_TYPES["q4_0"] == 18 / 32
    assert kv_bytes_per_token(LLAMA3_8B, "fp8") == 65536
    assert kv_bytes_per_token(LLAMA3_8B, "fp8_e5m2") == 65536
    assert kv_bytes_per_token(LLAMA3_8B, "q8_0") == 32 * 2 * (1024 // 32) * 34 == 69632  # 68 KiB
    assert kv_bytes_per_token(LLAMA3_8B, "q4_0") == 32 * 2 * (1024 // 32) * 18 == 36864  # 36 KiB
    assert kv_bytes_per_token(LLAMA3_8B, "f32") == 262144


def test_separate_k_and_v_types():
    both = 32 * (1024 // 32 * 34 + 1024 * 2)
    assert kv_bytes_per_token(LLAMA3_8B, ("q8_0", "f16")) == both
    assert kv_bytes_per_token(LLAMA3_8B, "q8_0/f16") == both


def test_auto_follows_the_model_dtype():
    fp32 = ModelShape(layers=2, attention_heads=4, kv_heads=4, head_dim=8, dtype_bytes=4)
    assert kv_bytes_per_token(fp32, "auto") == 2 * 2 * 32 * 4


def test_unknown_cache_type_is_a_spec_error():
    with pytest.raises(SpecError, match="unknown cache type 'q3_k'"):
        kv_bytes_per_token(LLAMA3_8B, "q3_k")


# --- MLA, sliding window, MoE -------------------------------------------------------------------


def test_mla_caches_one_latent_per_layer():
    assert kv_bytes_per_token(DEEPSEEK_V2, "bf16") == (512 + 64) * 60 * 2 == 69120
    assert kv_bytes_per_token(DEEPSEEK_V2, "fp8") == 34560
    # Without MLA the same heads would cost 2 x 60 x 128 x 192 x 2 bytes: 80x more.
    assert kv_bytes_per_sequence(DEEPSEEK_V2, 1000, "bf16") == 69120 * 1000


def test_sliding_window_layers_are_capped_at_the_window():
    per_layer = 2 * 8 * 256 * 2
    assert kv_bytes_per_token(GEMMA2_9B, "f16") == 42 * per_layer  # per token, uncapped
    assert kv_bytes_per_sequence(GEMMA2_9B, 2048, "f16") == 42 * per_layer * 2048  # inside the window
    assert kv_bytes_per_sequence(GEMMA2_9B, 8192, "f16") == per_layer * (21 * 8192 + 21 * 4096)
    assert kv_bytes_per_sequence(GEMMA2_9B, 8192, "f16") < kv_bytes_per_token(GEMMA2_9B) * 8192


def test_moe_reads_only_active_weights():
    # Mixtral-8x7B: 46.7B parameters held, 12.9B read per token; KV like a dense 32-layer GQA model.
    mixtral = ModelShape(
        layers=32,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
        moe_experts_total=8,
        moe_experts_active=2,
        params_total=46_700_000_000,
        params_active=12_900_000_000,
        weights_bytes=93_400_000_000,
    )
    assert kv_bytes_per_token(mixtral) == 131072
    assert mixtral.weights_active_bytes == 25_800_000_000
    plan = make_plan(mixtral, 2 * 80 * GiB, 4 * GiB, 32768, bandwidth=2e12, cache_types=["f16"])
    assert plan.weights_bytes == 93_400_000_000  # memory by the total
    assert plan.decode_ceiling_weights_only == pytest.approx(2e12 / 25.8e9)  # bandwidth by the active


def test_shape_validation():
    with pytest.raises(SpecError, match="layers"):
        ModelShape(layers=0, attention_heads=1, kv_heads=1, head_dim=1)
    with pytest.raises(SpecError, match="sliding_window"):
        ModelShape(layers=4, attention_heads=1, kv_heads=1, head_dim=1, sliding_window_layers=2)
    with pytest.raises(SpecError, match="MLA"):
        ModelShape(layers=4, attention_heads=1, kv_heads=1, head_dim=1, kv_lora_rank=512)


# --- pre-screen ---------------------------------------------------------------------------------


def test_prescreen_passes_what_fits_and_explains_what_does_not():
    assert prescreen_kv_fits(LLAMA3_8B, 15 * GiB, 24 * GiB, 2 * GiB, 7 * 8192, "f16") is None
    reason = prescreen_kv_fits(LLAMA3_8B, 15 * GiB, 24 * GiB, 2 * GiB, 8 * 8192, "f16")
    assert reason is not None and "\n" not in reason
    assert "KV 8.00 GiB" in reason and "> memory 24.00 GiB" in reason
    # The same 8 sequences fit with an 8-bit cache.
    assert prescreen_kv_fits(LLAMA3_8B, 15 * GiB, 24 * GiB, 2 * GiB, 8 * 8192, "q8_0") is None


def test_prescreen_uses_the_shapes_weights_when_none_given():
    shape = ModelShape(layers=32, attention_heads=32, kv_heads=8, head_dim=128, weights_bytes=30 * GiB)
    assert "weights 30.00 GiB" in prescreen_kv_fits(shape, None, 24 * GiB, 0, 1, "f16")


def test_prescreen_charges_sliding_layers_no_more_than_the_window():
    # 100k tokens on Gemma-2's windowed layers cost at most 4096 tokens each: a lower bound.
    per_layer = 2 * 8 * 256 * 2
    need = per_layer * (21 * 100_000 + 21 * 4096)
    assert prescreen_kv_fits(GEMMA2_9B, 0, need, 0, 100_000, "f16") is None
    assert prescreen_kv_fits(GEMMA2_9B, 0, need - 1, 0, 100_000, "f16") is not None


# --- units --------------------------------------------------------------------------------------


# --- the plan, rendered ---------------------------------------------------------------------------


def test_plan_holds_everything_the_command_prints():
    plan = make_plan(
        LLAMA3_8B,
        24 * GiB,
        2 * GiB,
        8192,
        users=4,
        bandwidth=1e12,
        parallel=4,
        weights_bytes=15 * GiB,
        table_tokens=(4096, 32768, 131072),
        table_users=(1, 4),
    )
    assert plan.cache_types == ("f16", "fp8", "q8_0", "q4_0")
    by = {c.cache_type: c for c in plan.caches}
    assert by["f16"].bytes_per_token == 131072 and by["f16"].bytes_per_sequence == GiB
    assert by["f16"].bytes_for_users == 4 * GiB and by["f16"].sequences_fit == 7
    assert by["fp8"].sequences_fit == 14
    assert plan.slots.per_slot == 2048 and plan.slots.ctx_size_for_full_context == 32768
    assert plan.decode_ceiling_weights_only == pytest.approx(1e12 / (15 * GiB))
    assert by["f16"].decode_ceiling_tok_s == pytest.approx(1e12 / (16 * GiB))
    assert [r.bytes[0] / GiB for r in plan.table] == [0.5, 2.0, 4.0, 16.0, 16.0, 64.0]
    assert any("exceeds" in n for n in plan.notes) is False


def test_plan_notes_what_is_unknown_or_impossible():
    plan = make_plan(LLAMA3_8B, 8 * GiB, 0, 16384, users=8, cache_types=["f16"])
    assert plan.caches[0].decode_ceiling_tok_s is None
    notes = " ".join(plan.notes)
    assert "exceeds the model's maximum" in notes and "weights size unknown" in notes and "do not fit" in notes
    with pytest.raises(SpecError, match="--context"):
        make_plan(ModelShape(layers=1, attention_heads=1, kv_heads=1, head_dim=1))


def test_default_table_rows_stop_at_the_models_maximum():
    plan = make_plan(LLAMA3_8B, context=2048, users=2)
    assert plan.table_tokens == (2048, 4096) and plan.table_users == (1, 2, 4)


def test_render_and_json():
    plan = make_plan(LLAMA3_8B, 24 * GiB, 2 * GiB, 8192, users=4, bandwidth=1e12, parallel=4, weights_bytes=15 * GiB)
    text = render(plan)
    assert "128.00 KiB" in text and "1.00 GiB" in text
    assert "--ctx-size 8192 --parallel 4: 2048 tokens per slot" in text
    assert "1.00 TB/s" in text and "62.1 tok/s" in text
    d = json.loads(json.dumps(plan_to_dict(plan)))
    f16 = d["caches"][0]
    assert f16["bytes_per_token"] == 131072 and f16["kib_per_token"] == 128.0 and f16["sequences_fit"] == 7
    assert d["table"][0] == {
        "tokens": 4096,
        "users": 1,
        "bytes": {"f16": GiB // 2, "fp8": GiB // 4, "q8_0": 285212672, "q4_0": 150994944},
        "gib": {"f16": 0.5, "fp8": 0.25, "q8_0": 0.2656, "q4_0": 0.1406},
    }
    assert d["memory_gib"] == 24.0 and d["slots"]["per_slot"] == 2048


def test_render_without_memory_or_bandwidth():
    text = render(make_plan(DEEPSEEK_V2, context=4096, cache_types=["bf16"]))
    assert "MLA" in text and "bandwidth unknown" in text and "MoE: 160 experts, 6 active" in text


# --- GPUs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,bw",
    [
        ("NVIDIA H200", 4.8e12),
        ("NVIDIA H100 80GB HBM3", 3.35e12),
        ("NVIDIA H100 PCIe", 2.0e12),
        ("NVIDIA H100 NVL", 3.9e12),
        ("NVIDIA A100-SXM4-80GB", 2.039e12),
        ("NVIDIA A100 80GB PCIe", 1.935e12),
        ("NVIDIA A100-SXM4-40GB", 1.555e12),
        ("NVIDIA A100-PCIE-40GB", 1.555e12),
        ("NVIDIA L40S", 8.64e11),
        ("NVIDIA L4", 3.0e11),
        ("NVIDIA A10", 6.0e11),
        ("NVIDIA A10G", 6.0e11),
        ("NVIDIA GeForce RTX 4090", 1.008e12),
        ("NVIDIA GeForce RTX 3090", 9.36e11),
        ("Tesla V100-SXM2-16GB", 9.0e11),
        ("Tesla T4", 3.2e11),
        ("Some Future GPU", None),
    ],
)
def test_bandwidth_by_gpu_name(name, bw):
    assert bandwidth_for(name) == bw


@pytest.mark.parametrize(
    "name,bw",
    [
        ("NVIDIA H100 80GB HBM3", 9.0e11),
        ("NVIDIA H100 NVL", 6.0e11),
        ("NVIDIA H200", 9.0e11),
        ("NVIDIA A100-SXM4-80GB", 6.0e11),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_nvlink_bandwidth_by_gpu_name(name, bw):
    assert nvlink_bandwidth_for(name) == bw


def test_pcie_bandwidth_both_directions():
    assert pcie_bandwidth(5, 16) == pytest.approx(126.0e9, rel=1e-3)  # "PCIe Gen5: 128 GB/s"
    assert pcie_bandwidth(4, 8) == pytest.approx(31.5e9, rel=1e-3)
    assert pcie_bandwidth(None, 16) is None and pcie_bandwidth(4, None) is None


def test_hardware_budget_from_gpus_and_overrides():
    gpus = [GpuInfo(0, "NVIDIA H100 80GB HBM3", 80 * GiB, 79 * GiB, 3.35e12)] * 2
    ram = CpuRam("Test CPU", 64 * GiB, 48 * GiB)
    hw = hardware_budget(gpus, ram)
    assert hw.kind == "gpu" and hw.memory_bytes == 160 * GiB and hw.bandwidth_bytes_s == 6.7e12
    assert hw.description == "2 x NVIDIA H100 80GB HBM3"
    hw = hardware_budget(gpus, ram, memory_bytes=24 * GiB, bandwidth_bytes_s=1e12)
    assert hw.memory_bytes == 24 * GiB and hw.bandwidth_bytes_s == 1e12
    cpu = hardware_budget([], ram)
    assert (cpu.kind, cpu.description, cpu.memory_bytes, cpu.free_bytes, cpu.bandwidth_bytes_s) == (
        "cpu",
        "CPU RAM (Test CPU)",
        64 * GiB,
        48 * GiB,
        None,
    )


def test_detect_hardware_reads_what_it_is_not_given():
    assert detect_hardware(gpus=[]).memory_bytes > 0  # this machine's RAM, through kvtune.hardware
    gpus = [GpuInfo(0, "NVIDIA L4", 24 * GiB, 23 * GiB, 3.0e11)]
    assert detect_hardware(gpus=gpus).description == "1 x NVIDIA L4"
