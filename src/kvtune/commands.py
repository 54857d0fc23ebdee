"""Short helper commands run to completion (``llama-server --version``, ``--list-devices``, a
probe of the installed vLLM): the output captured, never a server. Servers start only in
launchers/process.py. A leaf, so models, hf_model and every launcher can call it.

Every program kvtune starts that is not kvtune (a server, a helper command) gets
`child_environment`: kvtune's environment less its secrets. The study's storage URL, database
password included, reaches kvtune as KVTUNE_STORAGE (never argv, which every user of the host
can read in /proc); a server has no use for it, and its environment is readable by whoever can
inspect the server (a debugger, a crash dump, the same user's other processes)."""

from __future__ import annotations

import os
import subprocess
from typing import Mapping

# The storage URL of a study its workers share, as every kvtune command reads it.
STORAGE_ENV = "KVTUNE_STORAGE"
# What no program kvtune starts inherits (kvtune's own workers get the URL on purpose).
SECRET_ENV = (STORAGE_ENV,)


def child_environment(env: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with `extra` over it, less `SECRET_ENV`: the environment
    of a program kvtune starts that is not kvtune."""
    merged = {**(os.environ if env is None else env), **(extra or {})}
    return {k: v for k, v in merged.items() if k not in SECRET_ENV}


def run_capture(argv: list[str], timeout_s: float = 30.0) -> tuple[int, str]:
    """Run a short command (e.g. ``llama-server --version``); return (status, stdout+stderr)."""
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s, text=True, env=child_environment()
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, str(e)
    return done.returncode, (done.stdout or "") + (done.stderr or "")
