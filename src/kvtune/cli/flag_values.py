"""Flag words -> typed values, each checked once with a one-line error (exit 2): the parsing the
commands share (`kvtune run` and `kvtune bench` read --workload alike)."""

from __future__ import annotations

from kvtune.errors import SpecError
from kvtune.kinds import ProgressMode


def trace_of(workload: str | None) -> str | None:
    """--workload trace:FILE (a trace file or a shipped excerpt's name) -> FILE; multiturn -> None."""
    if workload is None or workload == "multiturn":
        return None
    kind, _, where = workload.partition(":")
    if kind != "trace" or not where.strip():
        raise SpecError(
            f"--workload takes multiturn or trace:FILE (a trace file, or azure-conv, azure-code, mooncake-conv), "
            f"got {workload!r}"
        )
    return where.strip()


def progress_mode(text: str) -> str:
    """--progress, checked: a misspelt mode was silently plain."""
    if text not in ProgressMode.values():
        raise SpecError(f"--progress must be one of {', '.join(ProgressMode.values())}, got {text!r}")
    return text
