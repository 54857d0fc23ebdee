"""The vLLM probe's answer kept on disk between kvtune processes, for CPU builds only.

Importing vLLM to ask what it is takes 10-20 s on a 2-core machine, and every `kvtune run`,
`worker` and `doctor` that drives vLLM asked again. A CPU build's answer depends only on what is
installed, so it is kept under kvtune's cache, keyed by the interpreter's path, and trusted while
the interpreter and vLLM's package file are the files that answered (same path, size and mtime:
a reinstall or upgrade changes them). A GPU build's answer also depends on which GPUs are
visible and on the driver, so it is never kept: a GPU user is probed every time.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvtune.launchers.vllm.installed import VllmProbe

VERSION = 2  # 2: the probe dumps the server's flags


def _entry_path(cache_dir: Path, python: str) -> Path:
    digest = hashlib.sha256(os.path.abspath(python).encode()).hexdigest()[:16]
    return cache_dir / "vllm-probes" / f"{digest}.json"


def _stamp(path: str | None) -> list[Any] | None:
    """What identifies the installed file: its path, size and mtime (None when it is gone)."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [os.path.abspath(path), st.st_size, st.st_mtime_ns]


def load(cache_dir: Path, python: str) -> dict[str, Any] | None:
    """The kept probe fields for `python`, when the files that answered are still those files."""
    try:
        entry = json.loads(_entry_path(cache_dir, python).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("version") != VERSION:
        return None
    if entry.get("python") != os.path.abspath(python) or entry.get("interpreter") != _stamp(python):
        return None
    package = entry.get("package") or []
    if not package or _stamp(package[0]) != package:
        return None
    probe = entry.get("probe")
    return probe if isinstance(probe, dict) else None


def store(cache_dir: Path, probe: "VllmProbe") -> None:
    """Keep `probe` when it is a usable CPU build and the file of its vLLM package is known
    (`probe.vllm_file`, stamped in the entry rather than kept among the probe's fields)."""
    package = _stamp(probe.vllm_file)
    if not (probe.is_cpu and probe.vllm and not probe.error and package):
        return
    entry = {
        "version": VERSION,
        "python": os.path.abspath(probe.python),
        "interpreter": _stamp(probe.python),
        "package": package,
        "probe": {k: v for k, v in asdict(probe).items() if k not in ("python", "vllm_file")},
    }
    path = _entry_path(cache_dir, probe.python)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs the next process its probe
