"""vLLM's GPU pre-screen and KV-token prediction against recorded NVML answers (tests/unit/data/
nvml: 1 x H100 SXM, 8 x H100 NVLink, 2 x RTX 4090 PCIe, an A100 70% used by another process).
No GPU ran these: the GPU start-up log (vllm_gpu_startup_synth.log) is synthesized from the
format strings of vLLM 0.32's source, so it checks the reading and the plumbing; the arithmetic
against a real vLLM is benchmarks/gpu_acceptance.sh's job."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvtune import hardware
from kvtune.knobs import Candidate
from kvtune.launchers.vllm import GPU, GiB, VllmBuild, VllmLauncher
from kvtune.launchers.vllm.flags import gpus_in_view
from kvtune.launchers.vllm.gpu_fit import (
    ACTIVATION_RESERVE_BYTES,
    CUDA_GRAPH_RESERVE_BYTES,
    kv_prediction,
    planned_kv_tokens,
    predicted_kv_tokens,
    prescreen_gpu_fit,
    rank_shape,
)
from kvtune.launchers.vllm.logs import non_default_args, parse_startup_log
from kvtune.planner.kv import ModelShape
from kvtune.testing.nvml_recorded import Recorded
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
# Llama-3.1-8B: 128 KiB of bf16 KV per token, 1 GiB per 8192-token sequence.
LLAMA8B = ModelShape(
    layers=32,
    attention_heads=32,
    kv_heads=8,
    head_dim=128,
    dtype_bytes=2,
    max_positions=131072,
    weights_bytes=16_060_522_496,
)
WL = Workload()


def gpus(name: str):
    report = hardware.gpu_report(Recorded(json.loads((DATA / "nvml" / f"{name}.json").read_text())))
    return tuple(hardware.gpu_infos(report))


def launcher(name: str, shape: ModelShape = LLAMA8B) -> VllmLauncher:
    found = gpus(name)
    build = VllmBuild(GPU, "vllm 0.32.0", python="/venv/bin/python", gpu_count=len(found), script="/venv/bin/vllm")
    return VllmLauncher(model="/models/llama", build=build, shape=shape, gpus=found)


def test_an_8b_model_fits_one_h100_and_its_reason_names_the_arithmetic() -> None:
    h100 = gpus("h100_sxm_x1")
    assert (
        prescreen_gpu_fit(
            LLAMA8B, h100, utilization=0.9, tp=1, max_model_len=8192, kv_dtype="auto", enforce_eager=False
        )
        is None
    )
    huge = replace(LLAMA8B, weights_bytes=80 * GiB)
    reason = prescreen_gpu_fit(
        huge, h100, utilization=0.9, tp=1, max_model_len=8192, kv_dtype="auto", enforce_eager=False
    )
    assert reason == (
        "weights 80.00 GiB + reserve 1.50 GiB (activations 1.00 GiB, CUDA graphs "
        "0.50 GiB) + KV 1.00 GiB (one --max-model-len 8192 sequence, auto) = 82.50 GiB "
        "> --gpu-memory-utilization 0.9 x 79.65 GiB = 71.68 GiB on GPU 0"
    )


def test_tensor_parallel_splits_weights_and_kv_on_two_4090s() -> None:
    lau = launcher("rtx4090_x2_pcie")
    long = {"max-model-len": 32768, "gpu-memory-utilization": 0.8}
    # one GPU: 14.96 weights + 1.5 reserve + 4 GiB KV > 0.8 x 23.99 = 19.19
    alone = lau.precheck(Candidate(flags=long), WL)
    assert alone and "KV 4.00 GiB" in alone and "> --gpu-memory-utilization 0.8" in alone
    # two: 7.48 + 1.5 + 2 GiB per GPU
    assert lau.precheck(Candidate(flags={**long, "tensor-parallel-size": 2}), WL) is None
    assert rank_shape(LLAMA8B, 2).kv_heads == 4 and rank_shape(LLAMA8B, 16).kv_heads == 1


def test_enforce_eager_keeps_back_less() -> None:
    h100 = gpus("h100_sxm_x1")
    budget = int(0.9 * h100[0].total_bytes)
    # weights chosen so that only the CUDA-graph reserve tips it over
    shape = replace(LLAMA8B, weights_bytes=budget - 1 * GiB - ACTIVATION_RESERVE_BYTES - CUDA_GRAPH_RESERVE_BYTES // 2)
    args = dict(utilization=0.9, tp=1, max_model_len=8192, kv_dtype="auto")
    assert prescreen_gpu_fit(shape, h100, enforce_eager=False, **args)
    assert prescreen_gpu_fit(shape, h100, enforce_eager=True, **args) is None


def test_a_gpu_taken_by_another_process_refuses_what_vllm_would_request() -> None:
    lau = launcher("a100_70pct_used")  # 24 of 80 GiB free
    reason = lau.precheck(Candidate(flags={"gpu-memory-utilization": 0.8}), WL)
    assert reason == (
        "GPU 0 has 24.00 GiB free < --gpu-memory-utilization 0.8 x 80.00 GiB = 64.00 GiB, which vLLM requests at start"
    )
    util = next(k for k in lau.default_knobs(WL, 8) if k.name == "gpu-memory-utilization")
    assert lau.offered_choices(util, {}) == util.choices  # none fits: precheck explains


def test_only_utilizations_the_free_memory_allows_are_offered() -> None:
    g = gpus("h100_sxm_x1")[0]
    half_used = replace(g, free_bytes=int(g.total_bytes * 0.87))
    lau = replace(launcher("h100_sxm_x1"), gpus=(half_used,))
    util = next(k for k in lau.default_knobs(WL, 8) if k.name == "gpu-memory-utilization")
    assert lau.offered_choices(util, {}) == (0.8, 0.85)


def test_gpu_knobs_keep_enforce_eager_and_tp_up_to_the_gpus() -> None:
    knobs = {k.name: k for k in launcher("h100_sxm_x8_nvlink").default_knobs(WL, 8)}
    assert knobs["enforce-eager"].choices == (False, True)
    assert knobs["tensor-parallel-size"].choices == (1, 2, 4, 8)


def test_pinned_gpus_are_the_ones_sized() -> None:
    lau = launcher("h100_sxm_x8_nvlink")
    lau.pin_gpus(frozenset({2, 3}))
    assert [g.index for g in lau.gpus] == [2, 3]
    assert "the 2 GPU(s) this trial gets" in lau.precheck(Candidate(flags={"tensor-parallel-size": 4}), WL)
    assert [g.index for g in gpus_in_view(list(gpus("h100_sxm_x8_nvlink")), {"CUDA_VISIBLE_DEVICES": "5,1"})] == [5, 1]
    assert len(gpus_in_view(list(gpus("h100_sxm_x8_nvlink")), {"CUDA_VISIBLE_DEVICES": "GPU-aaaa"})) == 8


def test_without_gpu_facts_or_shape_nothing_is_refused() -> None:
    lau = replace(launcher("h100_sxm_x1"), gpus=())
    assert lau.precheck(Candidate(flags={"max-model-len": 131072}), WL) is None
    assert (
        prescreen_gpu_fit(LLAMA8B, (), utilization=0.9, tp=1, max_model_len=8192, kv_dtype="auto", enforce_eager=False)
        is None
    )


def test_the_gpu_log_gives_kv_tokens_predicted_and_planned() -> None:
    text = (DATA / "vllm_gpu_startup_synth.log").read_text()
    facts = launcher("h100_sxm_x1").startup_facts(text)
    assert facts["kv_cache_device"] == "GPU" and facts["kv_cache_tokens"] == 449648
    assert facts["kv_available_gib"] == 54.89 and facts["weights_gib"] == 14.99
    assert facts["engine_init_s"] == 31.84 and facts["compile_s"] == 17.2
    assert facts["cuda_graphs_s"] == 11 and facts["cuda_graphs_gib"] == 0.58
    assert facts["kv_cache_tokens_predicted"] == 449648 and facts["kv_cache_tokens_error"] == 0
    # the pre-launch estimate: (0.9 x 79.65 - 14.96 - 1.5) GiB / 128 KiB, in 16-token blocks
    assert facts["kv_cache_tokens_planned"] == 452400
    assert non_default_args(text)["gpu_memory_utilization"] == 0.9


def test_the_cpu_log_prediction_uses_the_explicit_kv_bytes() -> None:
    smol = ModelShape(layers=30, attention_heads=9, kv_heads=3, head_dim=64, max_positions=8192)
    text = (DATA / "vllm_startup.log").read_text()
    facts = parse_startup_log(text)
    out = kv_prediction(facts, non_default_args(text), smol)
    # 512 MiB / 23,040 bytes per token = 23,301 tokens vs the 23,296 vLLM logged (0.02%)
    assert out == {"kv_cache_tokens_predicted": 23301, "kv_cache_tokens_error": 0.0002}
    assert kv_prediction(facts, {}, None) == {}


@pytest.mark.parametrize("tp,expected", [(1, 8192), (2, 16384), (8, 65536)])
def test_predicted_tokens_grow_with_tensor_parallel_heads_split(tp: int, expected: int) -> None:
    assert predicted_kv_tokens(1 * GiB, LLAMA8B, "auto", tp, 16) == expected
    assert predicted_kv_tokens(1 * GiB, LLAMA8B, "fp8", 1, 16) == 16384
    assert predicted_kv_tokens(1 * GiB, LLAMA8B, "nvfp4", 1, 16) is None


def test_planned_tokens_need_weights() -> None:
    assert (
        planned_kv_tokens(
            replace(LLAMA8B, weights_bytes=None),
            gpus("h100_sxm_x1"),
            utilization=0.9,
            tp=1,
            kv_dtype="auto",
            enforce_eager=True,
            block_size=16,
        )
        is None
    )


def test_a_model_folder_without_config_json_is_refused_before_any_launch(tmp_path: Path) -> None:
    from kvtune.errors import ModelError
    from kvtune.launchers.vllm import vllm_model

    build = VllmBuild(GPU, "vllm 0.32.0", python="/venv/bin/python", gpu_count=1)
    with pytest.raises(ModelError, match="has no config.json"):
        vllm_model(str(tmp_path), build)
    (tmp_path / "config.json").write_text("{}")
    assert vllm_model(str(tmp_path), build) == str(tmp_path)
    assert vllm_model("meta-llama/Llama-3.1-8B-Instruct", build) == "meta-llama/Llama-3.1-8B-Instruct"


def test_the_informed_start_on_gpus_is_kvtune_plans_suggestion() -> None:
    """`kvtune plan`'s suggested flags are what `kvtune run` measures after the baseline."""
    wl = Workload(concurrency=8, prompt_tokens=1000, output_tokens=200)
    one = launcher("h100_sxm_x1")
    guess = one.informed_start(one.default_knobs(wl, 16), wl)
    assert guess["max-num-seqs"] >= 8 and guess["gpu-memory-utilization"] == 0.92  # vLLM's default
    # a 70B model does not fit one H100: the smallest tensor-parallel size that holds it
    big = replace(LLAMA8B, layers=80, attention_heads=64, weights_bytes=141 * GiB)
    eight = launcher("h100_sxm_x8_nvlink", big)
    guess = eight.informed_start(eight.default_knobs(wl, 16), wl)
    assert guess["tensor-parallel-size"] == 2  # 2 x (0.92 x 79.65 - 2 GiB) = 142.6 GiB > 141 GiB + fp8 KV


def test_the_informed_start_on_cpu_is_the_preferred_rules_alone() -> None:
    build = VllmBuild("cpu", "vllm 0.32.0", python="/venv/bin/python")
    cpu = VllmLauncher(model="/models/llama", build=build, shape=LLAMA8B, memory_bytes=64 * GiB)
    knobs = cpu.default_knobs(WL, 2)
    from kvtune.launchers.base import informed_guess

    assert cpu.informed_start(knobs, WL) == informed_guess(knobs, WL, cpu.preferred)
