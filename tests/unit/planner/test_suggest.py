"""Suggested starting flags on the recorded machines (tests/unit/data/nvml) and on spec-sheet
GPUs: sized for the hardware, smaller where another process holds memory, partial offload and
fp8 where the model does not fit, and a suggestion that says when nothing fits."""

from __future__ import annotations

import json

import pytest

from kvtune import hardware
from kvtune.hardware import detect_hardware
from kvtune.planner.gpus import CpuRam, named_budget
from kvtune.planner.kv import ModelShape
from kvtune.planner.suggest import ALL_LAYERS, suggest
from kvtune.testing.nvml_recorded import Recorded
from tests.paths import NVML_DATA

GiB = 2**30
DATA = NVML_DATA
LLAMA_8B = ModelShape(
    layers=32, attention_heads=32, kv_heads=8, head_dim=128, weights_bytes=16 * GiB, max_positions=8192
)  # 128 KiB of f16 KV per token
LLAMA_70B = ModelShape(
    layers=80, attention_heads=64, kv_heads=8, head_dim=128, weights_bytes=140 * GiB, max_positions=8192
)
RAM = CpuRam("Test CPU", 64 * GiB, 48 * GiB)


def recorded(name: str):
    rec = Recorded(json.loads((DATA / f"{name}.json").read_text()))
    return detect_hardware(gpus=hardware.gpu_infos(hardware.gpu_report(rec)), ram=RAM)


def by_backend(shape, hw, users, context, reserve=None, utilization=0.92) -> dict:
    return {s.backend: s for s in suggest(shape, hw, users, context, reserve, vllm_utilization=utilization)}


def test_one_h100_holds_an_8b_model_and_eight_users_at_full_precision():
    s = by_backend(LLAMA_8B, recorded("h100_sxm_x1"), 8, 4096)
    assert s["vllm"].flags == {
        "gpu-memory-utilization": 0.92,
        "max-num-seqs": 8,
        "max-model-len": 4096,
        "kv-cache-dtype": "auto",
    }
    assert s["llama-server"].flags == {"parallel": 8, "ctx-size": 32768, "n-gpu-layers": ALL_LAYERS}
    assert all(x.fits and not x.notes for x in s.values())


def test_eight_h100s_use_one_gpu_for_a_model_that_fits_on_one_and_two_for_70b():
    assert by_backend(LLAMA_8B, recorded("h100_sxm_x8_nvlink"), 8, 4096)["vllm"].flags["tensor-parallel-size"] == 1
    big = by_backend(LLAMA_70B, recorded("h100_sxm_x8_nvlink"), 8, 4096)["vllm"]
    assert big.flags["tensor-parallel-size"] == 4 and big.fits  # 2 x (0.92 x 79.6 - 2) GiB leaves 2.5 GiB of KV
    # two spec-sheet H100s: 2 x (0.92 x 80 - 2) - 140 = 3.2 GiB holds five fp8 sequences; at 0.9 none
    two = by_backend(LLAMA_70B, named_budget("H100 SXM", 2), 8, 4096)["vllm"]
    assert two.fits and two.flags["max-num-seqs"] == 5 and two.flags["kv-cache-dtype"] == "fp8"
    assert by_backend(LLAMA_70B, named_budget("H100 SXM", 2), 8, 4096, utilization=0.9)["vllm"].fits is False


def test_two_rtx_4090s_fit_on_one_card_at_vllms_default_share_and_take_fp8_below_it():
    s = by_backend(LLAMA_8B, recorded("rtx4090_x2_pcie"), 8, 4096)
    # one card: 0.92 x 23.99 GiB - 2 GiB - 16 GiB = 4.07 GiB >= 4 GiB of f16 KV
    assert s["vllm"].flags["kv-cache-dtype"] == "auto" and s["vllm"].flags["tensor-parallel-size"] == 1
    assert s["llama-server"].flags["n-gpu-layers"] == ALL_LAYERS
    # at 0.9 (what kvtune assumed before reading vLLM): 3.59 GiB < 4 GiB of f16, fp8's 2 GiB fits
    low = by_backend(LLAMA_8B, recorded("rtx4090_x2_pcie"), 8, 4096, utilization=0.9)["vllm"]
    assert low.flags["kv-cache-dtype"] == "fp8" and low.flags["gpu-memory-utilization"] == 0.9


def test_a_gpu_70_percent_used_by_another_process_gets_a_smaller_share():
    s = by_backend(LLAMA_8B, recorded("a100_70pct_used"), 8, 4096)
    assert s["vllm"].flags["gpu-memory-utilization"] == 0.27
    assert "GPU 0 has 30% of its memory free" in s["vllm"].notes[0]
    # the same GPU planned from the spec sheet (nobody else on it): vLLM's default share
    assert by_backend(LLAMA_8B, named_budget("A100 80GB SXM"), 8, 4096)["vllm"].flags["gpu-memory-utilization"] == 0.92


def test_partial_offload_when_the_model_does_not_fit_the_gpu():
    s = by_backend(LLAMA_70B, named_budget("RTX 4090"), 1, 4096)["llama-server"]
    assert 0 < s.flags["n-gpu-layers"] < 80 and "layers on the GPU, the rest in RAM" in s.notes[-1]
    vllm = by_backend(LLAMA_70B, named_budget("RTX 4090"), 1, 4096)["vllm"]
    assert not vllm.fits and "max-model-len" not in vllm.flags and "no room for a KV cache" in vllm.notes[0]


def test_too_many_users_queue_instead_of_failing():
    s = by_backend(LLAMA_8B, named_budget("RTX 4090"), 64, 8192)["vllm"]
    assert s.flags["kv-cache-dtype"] == "fp8" and 1 <= s.flags["max-num-seqs"] < 64
    assert "the rest queue" in s.notes[0]


def test_the_cpu_gets_no_gpu_flags():
    s = by_backend(LLAMA_8B, detect_hardware(gpus=[], ram=RAM), 4, 2048)
    assert "gpu-memory-utilization" not in s["vllm"].flags and "n-gpu-layers" not in s["llama-server"].flags
    assert s["llama-server"].flags == {"parallel": 4, "ctx-size": 8192} and s["llama-server"].fits


def test_the_context_is_capped_at_the_models_maximum_and_the_reserve_counts():
    assert by_backend(LLAMA_8B, named_budget("H100 SXM"), 1, 100_000)["vllm"].flags["max-model-len"] == 8192
    small = by_backend(LLAMA_8B, named_budget("RTX 4090"), 8, 4096, reserve=7 * GiB)["vllm"]
    assert not small.fits


@pytest.mark.parametrize("users", [1, 3, 16])
def test_suggestions_are_pure(users):
    hw = recorded("rtx4090_x2_pcie")
    assert suggest(LLAMA_8B, hw, users, 2048) == suggest(LLAMA_8B, hw, users, 2048)
