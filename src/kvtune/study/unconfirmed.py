"""What a study's readers say while its confirmation has not run yet.

A study set up for a scheduler's workers (`kvtune run --setup-only`) is confirmed at its end by
one of them, or by `kvtune confirm` (tuner/fleet/confirmer.py). Until then its best is named from
single search measurements: the top of many noisy figures, biased up (the winner's curse).
`kvtune show`, `kvtune report` and `kvtune export` read the study's payload alike, so the note
travels in it (`KEY`), and each of them prints the same line, with the command that confirms.
"""

from __future__ import annotations

from typing import Any, Mapping

KEY = "not_confirmed"
WHY = "the best is named from single search measurements (the top of many noisy figures, biased up)"


def note(study: str, storage_shown: str) -> dict[str, str]:
    """The payload's block (`storage_shown`: the storage URL with its password masked)."""
    return {"why": WHY, "command": f"kvtune confirm --storage {storage_shown} --study {study}"}


def line(results: Mapping[str, Any]) -> str | None:
    """The one line readers print; None when the study is confirmed or needs no confirmation."""
    block = results.get(KEY)
    if not isinstance(block, dict):
        return None
    return (
        f"not confirmed yet: {block.get('why') or WHY}; its last worker confirms it when the budget is "
        f"spent, or run: {block.get('command')}"
    )
