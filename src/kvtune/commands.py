"""Short helper commands run to completion (``llama-server --version``, ``--list-devices``, a
probe of the installed vLLM): the output captured, never a server. Servers start only in
launchers/process.py. A leaf, so models, hf_model and every launcher can call it."""

from __future__ import annotations

import subprocess


def run_capture(argv: list[str], timeout_s: float = 30.0) -> tuple[int, str]:
    """Run a short command (e.g. ``llama-server --version``); return (status, stdout+stderr)."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s, text=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, str(e)
    return done.returncode, (done.stdout or "") + (done.stderr or "")
