"""Invalid or aliasing combinations are not sampled: each backend's `offered_choices` narrows a
knob given the flags drawn before it, and the search space samples only those (a narrowed set is
its own Optuna parameter, so every name keeps one distribution). Sampled with the study's own
sampler settings (TPE, multivariate, grouped) and with random search."""

from __future__ import annotations

import random
import warnings

import optuna
import pytest

from kvtune.knobs import Candidate, Knob
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.launchers.vllm import CPU, GPU, GiB, VllmBuild, VllmLauncher
from kvtune.planner.kv import ModelShape
from kvtune.study.space import merge_knobs
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.workload import Workload

W = Workload(prompt_tokens=200, output_tokens=64)
LLAMA = LlamaServerLauncher(binary="/usr/bin/llama-server", model_path="/m/model.gguf")
SMOL = ModelShape(layers=30, attention_heads=9, kv_heads=3, head_dim=64, dtype_bytes=2, max_positions=8192)


def vllm(kind: str = CPU, gpus: int = 0) -> VllmLauncher:
    build = VllmBuild(kind, "vllm 0.32.0", python="/venv/bin/python", gpu_count=gpus)
    return VllmLauncher(model="/m/hf", build=build, shape=SMOL, memory_bytes=8 * GiB, cpu_ids=(0, 1), fp8_capable=True)


SAMPLERS = ("tpe", "random")


def make_sampler(name: str) -> optuna.samplers.BaseSampler:
    """A fresh sampler (TPE caches the search space of the study it served)."""
    if name == "random":
        return optuna.samplers.RandomSampler(seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=3, n_startup_trials=10, multivariate=True, group=True)


def sample(space: SearchSpace, sampler: optuna.samplers.BaseSampler, n: int = 200) -> list[Candidate]:
    """`n` candidates, each told a random value so TPE models the space too."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=sampler)
    rng = random.Random(0)
    out = []
    for _ in range(n):
        t = study.ask()
        out.append(space.suggest(t))
        study.tell(t, rng.random())
    return out


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_llama_server_never_samples_ubatch_above_batch(sampler):
    space = SearchSpace(LLAMA.default_knobs(W, 4), LLAMA)
    candidates = sample(space, make_sampler(sampler))
    pairs = {(c.flags["batch-size"], c.flags["ubatch-size"]) for c in candidates}
    assert all(u <= b for b, u in pairs)
    # nothing valid was lost: at batch 256 every ubatch up to it is still drawn
    assert {u for b, u in pairs if b == 256} == {64, 128, 256}


def test_the_narrowed_ubatch_is_its_own_parameter_and_the_full_set_keeps_the_name():
    space = SearchSpace(LLAMA.default_knobs(W, 4), LLAMA)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    names = set()
    for _ in range(60):
        t = study.ask()
        c = space.suggest(t)
        study.tell(t, 0.0)
        ubatch = [k for k in t.params if k.startswith("ubatch-size")]
        assert len(ubatch) == 1
        names.add(ubatch[0])
        assert ubatch[0] == ("ubatch-size[64, 128, 256]" if c.flags["batch-size"] == 256 else "ubatch-size")
    assert names == {"ubatch-size", "ubatch-size[64, 128, 256]"}


def test_a_fixed_batch_narrows_a_study_files_ubatch_choices():
    knobs = merge_knobs(LLAMA.default_knobs(W, 4), {"batch-size": 128, "ubatch-size": [32, 64, 128, 512]})
    space = SearchSpace(knobs, LLAMA)
    assert {c.flags["ubatch-size"] for c in sample(space, optuna.samplers.RandomSampler(seed=2), 40)} == {32, 64, 128}
    # all of a study's choices invalid: offered anyway, and the pre-screen keeps its say
    only_big = SearchSpace(merge_knobs(LLAMA.default_knobs(W, 4), {"batch-size": 64, "ubatch-size": [128, 256]}), LLAMA)
    assert {c.flags["ubatch-size"] for c in sample(only_big, optuna.samplers.RandomSampler(seed=2), 20)} == {128, 256}


def test_one_valid_choice_is_taken_without_asking():
    knob = Knob("ubatch-size", "choices", choices=(64, 512))
    space = SearchSpace([Knob("batch-size", "fixed", value=64), knob], LLAMA)
    t = optuna.create_study().ask()
    assert space.suggest(t).flags == {"batch-size": 64, "ubatch-size": 64} and t.params == {}


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("kind,gpus", [(CPU, 0), (GPU, 2)])
def test_vllm_samples_nothing_its_precheck_refuses(sampler, kind, gpus):
    lau = vllm(kind, gpus)
    space = SearchSpace(lau.default_knobs(Workload(concurrency=64), 2), lau)
    for c in sample(space, make_sampler(sampler)):
        assert lau.precheck(c, Workload(concurrency=64)) is None, c.flags
        f = c.flags
        if f.get("enable-chunked-prefill") is False:
            assert f["max-num-batched-tokens"] >= f["max-model-len"]
        assert f["max-num-batched-tokens"] >= f["max-num-seqs"]


def test_vllm_offered_choices_follow_the_flags_drawn_before():
    lau = vllm()
    chunked = Knob("enable-chunked-prefill", "choices", choices=(True, False))
    assert lau.offered_choices(chunked, {"max-model-len": 1024, "max-num-batched-tokens": 512}) == (True,)
    assert lau.offered_choices(chunked, {"max-model-len": 512, "max-num-batched-tokens": 512}) == (True, False)
    batched = Knob("max-num-batched-tokens", "choices", choices=(64, 128, 256))
    assert lau.offered_choices(batched, {"max-num-seqs": 128}) == (128, 256)
    tp = Knob("tensor-parallel-size", "choices", choices=(1, 2, 3, 4))
    assert vllm(GPU, 4).offered_choices(tp, {}) == (1, 3)  # 9 heads
