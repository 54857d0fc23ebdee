"""llama-server's prefix-reuse knobs, offered only when the workload's requests share prefixes.

Conversations re-send their history, a trace repeats blocks, a system prompt opens many requests:
then --cache-reuse (the smallest chunk of a cached prompt reused by shifting the KV cache; 0 =
off) and --slot-prompt-similarity (how alike a prompt must be to a slot's cached one to go to that
slot; 0 = any free slot) change what a request costs. Synthetic prompts share nothing, so the
knobs would only widen the search. A build whose `--help` lacks a flag is not offered it.
"""

from __future__ import annotations

from typing import Container

from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.workload import Workload

CACHE_REUSE_CHOICES = (0, 64, 256)  # tokens; llama-server's default is 0 (no KV shifting)
SLOT_SIMILARITY_CHOICES = (0.0, 0.1, 0.5)  # llama-server's default is 0.10


def reuse_knobs(workload: Workload, build_flags: Container[str]) -> list[Knob]:
    """The reuse knobs for `workload`, those of them the build has (`build_flags`: its --help's)."""
    if not workload.reuses_prefixes:
        return []
    table = (
        Knob("cache-reuse", KnobKind.CHOICES, choices=CACHE_REUSE_CHOICES),
        Knob("slot-prompt-similarity", KnobKind.CHOICES, choices=SLOT_SIMILARITY_CHOICES),
    )
    return [k for k in table if k.name in build_flags]
