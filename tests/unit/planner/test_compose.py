"""`kvtune plan`'s table and its suggested flags read the same figures (planner/compose.py): one
reserve, held back in both and stated; the decode ceiling for the tensor-parallel size the
suggestion names, not for every GPU; and a quantized V cache only beside flash attention."""

from __future__ import annotations

import json

import pytest

from kvtune import hardware
from kvtune.errors import SpecError
from kvtune.hardware import detect_hardware
from kvtune.planner.compose import compose
from kvtune.planner.gpus import CpuRam, named_budget
from kvtune.planner.kv import ModelShape, decode_ceiling_tok_s
from kvtune.planner.plan_text import composed_to_dict, render_composed
from kvtune.planner.suggest import CPU_RESERVE_BYTES, GPU_RESERVE_BYTES
from kvtune.testing.nvml_recorded import Recorded
from tests.paths import NVML_DATA

GiB = 2**30
LLAMA_8B = ModelShape(
    layers=32, attention_heads=32, kv_heads=8, head_dim=128, weights_bytes=16 * GiB, max_positions=8192
)  # 128 KiB of f16 KV per token
LLAMA_70B = ModelShape(
    layers=80, attention_heads=64, kv_heads=8, head_dim=128, weights_bytes=140 * GiB, max_positions=8192
)
RAM = CpuRam("Test CPU", 64 * GiB, 48 * GiB)
CPU = detect_hardware(gpus=[], ram=RAM)


def recorded(name: str):
    rec = Recorded(json.loads((NVML_DATA / f"{name}.json").read_text()))
    return detect_hardware(gpus=hardware.gpu_infos(hardware.gpu_report(rec)), ram=RAM)


def by_backend(pf) -> dict:
    return {s.backend: s for s in pf.suggestions}


# --- one reserve --------------------------------------------------------------------------------


def test_the_default_reserve_is_held_back_in_the_table_and_in_both_suggestions():
    pf = compose(LLAMA_8B, named_budget("H100 SXM", 2), 8, 4096)
    s = by_backend(pf)
    assert (pf.reserve.per_device, pf.reserve.devices, pf.reserve.given) == (GPU_RESERVE_BYTES, 2, False)
    assert pf.plan.reserve_bytes == pf.reserve.total == 2 * GPU_RESERVE_BYTES
    # llama-server spans both GPUs (layer split): its KV room is the table's, to the byte
    assert s["llama-server"].kv_room_bytes == pf.plan.free_for_kv_bytes == 160 * GiB - 16 * GiB - 4 * GiB
    # vLLM on the one GPU it suggests: its share of that GPU, less the same per-GPU reserve
    assert s["vllm"].kv_room_bytes == int(0.92 * 80 * GiB - GPU_RESERVE_BYTES - 16 * GiB)
    text = render_composed(pf)
    assert "- reserve 4.00 GiB = 140.00 GiB for the KV cache" in text
    assert "reserve: 2.00 GiB on each of 2 GPUs = 4.00 GiB (the default; --reserve sets it)" in text
    assert "1 x (0.92 x 80.00 GiB - reserve 2.00 GiB) - weights 16.00 GiB" in text
    assert "160.00 GiB - reserve 4.00 GiB - weights 16.00 GiB = 140.00 GiB for the KV cache" in text


def test_a_reserve_of_zero_is_zero_everywhere_not_the_default():
    pf = compose(LLAMA_8B, named_budget("H100 SXM"), 8, 4096, reserve_bytes=0)
    s = by_backend(pf)
    assert pf.reserve.given and pf.plan.reserve_bytes == 0
    assert s["llama-server"].kv_room_bytes == pf.plan.free_for_kv_bytes == 80 * GiB - 16 * GiB
    assert s["vllm"].kv_room_bytes == int(0.92 * 80 * GiB - 16 * GiB)
    assert "(--reserve), the same in the suggested flags" in render_composed(pf)


def test_a_given_reserve_is_per_gpu_in_the_table_and_the_flags():
    pf = compose(LLAMA_8B, named_budget("RTX 4090", 2), 8, 4096, reserve_bytes=3 * GiB)
    s = by_backend(pf)
    assert pf.plan.reserve_bytes == 6 * GiB
    assert s["llama-server"].kv_room_bytes == pf.plan.free_for_kv_bytes
    tp = s["vllm"].flags["tensor-parallel-size"]
    assert s["vllm"].kv_room_bytes == int(tp * (0.92 * 24 * GiB - 3 * GiB) - 16 * GiB)


def test_on_the_cpu_the_reserve_is_held_back_once():
    pf = compose(LLAMA_8B, CPU, 4, 2048)
    s = by_backend(pf)
    assert (pf.reserve.devices, pf.plan.reserve_bytes) == (1, CPU_RESERVE_BYTES)
    room = RAM.available_bytes - 16 * GiB - CPU_RESERVE_BYTES  # a new server gets what is available
    assert s["vllm"].kv_room_bytes == s["llama-server"].kv_room_bytes == room
    assert pf.ceiling_gpus is None and pf.ceiling_basis() == ""
    assert "reserve: 1.00 GiB beside the server (the default" in render_composed(pf)


def test_the_json_carries_the_reserve_and_each_suggestions_room():
    d = composed_to_dict(compose(LLAMA_8B, named_budget("H100 SXM", 2), 8, 4096))
    assert d["reserve"] == {
        "per_device_bytes": GPU_RESERVE_BYTES,
        "devices": 2,
        "on_gpu": True,
        "total_bytes": 2 * GPU_RESERVE_BYTES,
        "given": False,
    }
    assert d["reserve_bytes"] == d["reserve"]["total_bytes"]
    assert {s["backend"]: s["kv_room_bytes"] for s in d["suggestions"]}["llama-server"] == d["free_for_kv_bytes"]


# --- the decode ceiling for the suggested tensor-parallel size ---------------------------------


def test_an_8b_model_on_eight_gpus_decodes_at_one_gpus_bandwidth():
    pf = compose(LLAMA_8B, named_budget("H100 SXM", 8), 8, 4096)
    assert by_backend(pf)["vllm"].flags["tensor-parallel-size"] == 1 and pf.ceiling_gpus == 1
    assert pf.plan.bandwidth_bytes_s == pytest.approx(3.35e12)  # not 8 x 3.35 TB/s
    assert pf.plan.decode_ceiling_weights_only == pytest.approx(decode_ceiling_tok_s(3.35e12, 16 * GiB))
    assert "3.35 TB/s (1 of 8 GPUs: the suggested --tensor-parallel-size 1)" in render_composed(pf)


def test_a_70b_model_decodes_at_the_bandwidth_of_the_gpus_it_is_split_over():
    pf = compose(LLAMA_70B, recorded("h100_sxm_x8_nvlink"), 8, 4096)
    tp = by_backend(pf)["vllm"].flags["tensor-parallel-size"]
    assert tp == 4 and pf.ceiling_gpus == 4 and pf.gpus == 8
    assert pf.plan.bandwidth_bytes_s == pytest.approx(pf.hardware.bandwidth_bytes_s * 4 / 8)
    f16 = pf.plan.caches[0]
    assert f16.decode_ceiling_tok_s == pytest.approx(
        decode_ceiling_tok_s(4 * 3.35e12, 140 * GiB, f16.bytes_per_sequence)
    )
    assert "(4 of 8 GPUs: the suggested --tensor-parallel-size 4)" in render_composed(pf)
    assert composed_to_dict(pf)["decode_ceiling_gpus"] == 4


def test_a_given_bandwidth_is_all_gpus_and_the_ceiling_takes_the_suggested_share():
    pf = compose(LLAMA_8B, named_budget("H100 SXM", 2, bandwidth_bytes_s=8e12), 1, 4096)
    assert pf.ceiling_gpus == 1 and pf.plan.bandwidth_bytes_s == pytest.approx(4e12)


def test_one_gpu_says_so_and_the_cpu_keeps_its_bandwidth():
    one = compose(LLAMA_8B, named_budget("H100 SXM"), 1, 4096)
    assert one.plan.bandwidth_bytes_s == pytest.approx(3.35e12) and "3.35 TB/s (1 GPU)" in render_composed(one)
    cpu = compose(LLAMA_8B, detect_hardware(bandwidth_bytes_s=1e11, gpus=[], ram=RAM), 1, 4096)
    assert cpu.plan.bandwidth_bytes_s == 1e11


# --- a quantized V cache only with flash attention ---------------------------------------------


@pytest.mark.parametrize(
    "shape,hw,users,context",
    [
        (LLAMA_8B, named_budget("RTX 4090"), 8, 8192),  # f16 needs 24 GiB of 22: q8_0
        (LLAMA_8B, named_budget("L4"), 16, 8192),  # f16 and q8_0 do not fit: q4_0
        (LLAMA_8B, detect_hardware(gpus=[], ram=CpuRam("Small", 32 * GiB, 24 * GiB)), 8, 8192),  # CPU RAM
        (LLAMA_70B, named_budget("H100 SXM", 2), 16, 8192),
    ],
)
def test_a_quantized_v_cache_comes_with_flash_attention(shape, hw, users, context):
    llama = by_backend(compose(shape, hw, users, context))["llama-server"]
    assert llama.flags["cache-type-v"] in ("q8_0", "q4_0")  # the case this test is about
    assert llama.flags["flash-attn"] == "on"
    argv = llama.argv()
    assert argv.index("--flash-attn") < argv.index("--cache-type-v") and argv[argv.index("--flash-attn") + 1] == "on"
    assert any("needs flash attention: --flash-attn on" in n for n in llama.notes)


def test_an_f16_cache_leaves_flash_attention_to_the_server():
    llama = by_backend(compose(LLAMA_8B, named_budget("H100 SXM"), 8, 4096))["llama-server"]
    assert "cache-type-v" not in llama.flags and "flash-attn" not in llama.flags


# --- refusals -----------------------------------------------------------------------------------


def test_an_unknown_cache_type_or_no_context_is_refused_before_any_figure():
    with pytest.raises(SpecError, match="unknown cache type 'q9'"):
        compose(LLAMA_8B, CPU, 1, 4096, cache_types=("f16", "q9"))
    no_max = ModelShape(layers=2, attention_heads=2, kv_heads=2, head_dim=64)
    with pytest.raises(SpecError, match="no context length: pass --context N"):
        compose(no_max, CPU, 1, None)


def test_compose_is_pure():
    hw = recorded("rtx4090_x2_pcie")
    assert compose(LLAMA_8B, hw, 3, 2048) == compose(LLAMA_8B, hw, 3, 2048)
