"""Which interpreter runs vLLM (kvtune/vllm_python.py): the flag, then the environment, then
kvtune's own Python when it has the modules, then the CPU venv beside kvtune's venv. Module
lookups and the sibling venv are injected: nothing of this machine's installs is read."""

from __future__ import annotations

import sys
from pathlib import Path

from kvtune.launchers.vllm_python import ENV_VAR, beside_venv_python, vllm_python


def _sibling(tmp_path: Path, exists: bool = True) -> Path:
    python = tmp_path / ".venv-vllm-cpu" / "bin" / "python"
    if exists:
        python.parent.mkdir(parents=True)
        python.write_text("")
    return python


def test_the_flag_wins_then_the_environment(tmp_path: Path) -> None:
    sibling = _sibling(tmp_path)
    env = {ENV_VAR: "/opt/vllm/bin/python"}
    assert vllm_python("/given/python", env=env, beside=sibling) == "/given/python"
    assert vllm_python(None, env=env, beside=sibling) == "/opt/vllm/bin/python"


def test_kvtunes_own_python_when_it_has_vllm_so_a_cuda_build_is_never_shadowed(tmp_path: Path) -> None:
    sibling = _sibling(tmp_path)
    assert vllm_python(env={}, has_module=lambda name: True, beside=sibling) == sys.executable


def test_the_cpu_venv_beside_when_kvtunes_python_lacks_a_needed_module(tmp_path: Path) -> None:
    sibling = _sibling(tmp_path)
    has = {"vllm": False, "torch": True, "transformers": True}
    assert vllm_python(env={}, has_module=has.__getitem__, beside=sibling) == str(sibling)
    # the conversion needs torch and transformers, not vLLM itself
    assert vllm_python(env={}, needs=("torch", "transformers"), has_module=has.__getitem__, beside=sibling) == (
        sys.executable
    )


def test_without_a_cpu_venv_kvtunes_own_python_is_named_so_the_missing_vllm_is_reported(tmp_path: Path) -> None:
    missing = _sibling(tmp_path, exists=False)
    assert vllm_python(env={}, has_module=lambda name: False, beside=missing) == sys.executable


def test_the_cpu_venv_is_looked_for_beside_kvtunes_venv() -> None:
    assert beside_venv_python("/home/u/kvtune/.venv") == Path("/home/u/kvtune/.venv-vllm-cpu/bin/python")
