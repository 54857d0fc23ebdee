"""Configurations vLLM itself calls unsupported are never offered (issue 19, item 4): on GPUs
chunked prefill off "may crash or produce incorrect outputs", so the GPU search space leaves the
flag at vLLM's default unless a study file asks for it; the CPU build keeps both choices."""

from __future__ import annotations

from kvtune.knobs import Candidate
from kvtune.launchers.vllm import CPU, GPU, GiB, VllmBuild, VllmLauncher
from kvtune.planner.kv import ModelShape
from kvtune.study.space import merge_knobs
from kvtune.workload import Workload

SMOL = ModelShape(layers=30, attention_heads=9, kv_heads=3, head_dim=64, max_positions=8192)
WL = Workload(concurrency=4, prompt_tokens=200, output_tokens=50)


def launcher(kind: str) -> VllmLauncher:
    build = VllmBuild(kind, "vllm 0.32.0", python="/venv/bin/python", gpu_count=1 if kind == GPU else 0)
    return VllmLauncher(model="/models/smol", build=build, shape=SMOL, memory_bytes=16 * GiB, cpu_ids=(0, 1))


def test_gpu_knobs_leave_chunked_prefill_at_vllms_default_and_cpu_knobs_tune_it() -> None:
    gpu = {k.name: k for k in launcher(GPU).default_knobs(WL, 2)}
    cpu = {k.name: k for k in launcher(CPU).default_knobs(WL, 2)}
    assert "enable-chunked-prefill" not in gpu and "enable-prefix-caching" in gpu
    assert cpu["enable-chunked-prefill"].choices == (True, False)
    assert "--no-enable-chunked-prefill" not in launcher(GPU).command(Candidate(), 8000)


def test_a_study_file_that_asks_for_chunked_prefill_off_on_gpu_gets_it() -> None:
    lau = launcher(GPU)
    asked = merge_knobs(lau.default_knobs(WL, 2), {"enable-chunked-prefill": [True, False]})
    knob = next(k for k in asked if k.name == "enable-chunked-prefill")
    assert lau.offered_choices(knob, {"max-model-len": 256}) == (True, False)
    off = Candidate(flags={"enable-chunked-prefill": False})
    assert lau.precheck(off, WL) is None and "--no-enable-chunked-prefill" in lau.command(off, 8000)
