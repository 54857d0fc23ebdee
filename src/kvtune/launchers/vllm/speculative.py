"""vLLM's speculative decoding knob: ``--speculative-config`` as JSON, off unless the study asks.

With no second model, vLLM's n-gram (prompt lookup) proposer drafts `num_speculative_tokens`
tokens from the longest earlier match of up to `prompt_lookup_max` tokens in the prompt and the
output so far: it pays on traffic that repeats its context (summaries, code edits, multi-turn
chat), and costs verification work elsewhere. With a draft model (``--draft-model``: an HF
folder or hub id with the target's vocabulary) the draft length is tuned. The first choice is
always off (None: no flag), so the search can find speculation does not pay on this workload.

vLLM 0.32's CPU build runs both (v1/worker/cpu_model_runner.py: "speculative decoding is now
supported on CPU with C++ native impls"; it warns that without Intel OpenMP preloaded it is slow),
so the knob is offered on CPU and GPU builds alike.
"""

from __future__ import annotations

import json

from kvtune.kinds import KnobKind
from kvtune.knobs import Knob

SPECULATIVE_CONFIG = "speculative-config"
# (num_speculative_tokens, prompt_lookup_max): short and long drafts, short and long matches.
NGRAM_SHAPES = ((2, 3), (4, 3), (4, 5), (8, 5))
DRAFT_LENGTHS = (2, 4, 8)


def config_json(**fields: object) -> str:
    """One --speculative-config value: compact JSON with sorted keys (stable argv, stable names)."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def speculative_knobs(draft_model: str | None, speculative: bool) -> list[Knob]:
    """The --speculative-config choices the study asked for: none unless it named a draft model
    or asked for speculation."""
    if draft_model is None and not speculative:
        return []
    choices: list[str | None] = [None]
    if speculative or draft_model is None:
        choices += [config_json(method="ngram", num_speculative_tokens=k, prompt_lookup_max=m) for k, m in NGRAM_SHAPES]
    if draft_model is not None:
        choices += [config_json(model=draft_model, num_speculative_tokens=k) for k in DRAFT_LENGTHS]
    return [Knob(SPECULATIVE_CONFIG, KnobKind.CHOICES, choices=tuple(choices))]
