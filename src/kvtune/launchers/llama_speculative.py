"""llama-server's speculative decoding knobs, spelled as the built binary's ``--help`` spells them.

Speculation pays only when drafts are accepted, and that depends on the traffic (repetitive text,
code edits, a draft model close to the target), so the knobs are off unless the study asks:
``--draft-model PATH`` (a second, smaller GGUF: the search tries drafting with it or not, and
the draft length) or ``--speculative`` (no second model: the n-gram / prompt-lookup modes the
build lists, or none). The baseline never speculates (the server's defaults).

The spelling moved between llama.cpp builds: current ones take ``--spec-type`` (none,
draft-simple, ngram-simple, ngram-map-k, ngram-mod, ...), ``--spec-draft-model`` and
``--spec-draft-n-max`` (``--draft-max`` is "removed" there); older ones only a draft model
(``--model-draft``/``-md``) and ``--draft-max``, and no n-gram mode. `LlamaSpeculation.of` reads
which from the parsed help (llama_binary.py), so argv uses what this binary accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.launchers.llama_binary import LlamaDefaults

SPEC_TYPE = "spec-type"
SPEC_OFF = "none"
DRAFT_TYPE = "draft-simple"  # a separate draft model
# The no-second-model modes kvtune offers, where the build lists them (llama.cpp common/speculative).
NGRAM_TYPES = ("ngram-simple", "ngram-map-k", "ngram-mod")
DRAFT_LENGTHS = (2, 4, 8, 16)  # tokens drafted per step (the server's default: 3, or 16 on old builds)


@dataclass(frozen=True)
class LlamaSpeculation:
    """Which speculative flags this build takes (None / empty: it has none)."""

    draft_model_flag: str | None = None  # spec-draft-model (current) or model-draft (older)
    draft_max_flag: str | None = None  # spec-draft-n-max (current) or draft-max (older)
    spec_types: tuple[str, ...] = ()  # what --spec-type lists; empty: no --spec-type

    @classmethod
    def of(cls, defaults: LlamaDefaults) -> "LlamaSpeculation":
        names = defaults.values
        return cls(
            draft_model_flag=next((n for n in ("spec-draft-model", "model-draft") if n in names), None),
            draft_max_flag=next((n for n in ("spec-draft-n-max", "draft-max") if n in names), None),
            spec_types=defaults.spec_types,
        )

    @property
    def ngram_types(self) -> tuple[str, ...]:
        return tuple(t for t in NGRAM_TYPES if t in self.spec_types)

    def knobs(self, draft_model: str | None, speculative: bool) -> list[Knob]:
        """The speculative knobs a study asked for (none unless it did); `SpecError` when this
        build cannot do what was asked."""
        if draft_model is None and not speculative:
            return []
        if draft_model is None:
            if not self.ngram_types:
                raise SpecError(
                    "speculative: this llama-server build has no n-gram speculation (--spec-type); "
                    "give a draft model (draft_model: PATH)"
                )
            return [Knob(SPEC_TYPE, KnobKind.CHOICES, choices=(SPEC_OFF, *self.ngram_types))]
        if self.draft_model_flag is None or self.draft_max_flag is None:
            raise SpecError("draft_model: this llama-server build takes no draft model (no -md in its --help)")
        draft = [
            Knob(self.draft_model_flag, KnobKind.FIXED, value=draft_model),
            Knob(self.draft_max_flag, KnobKind.CHOICES, choices=DRAFT_LENGTHS),
        ]
        if not self.spec_types:  # an older build: the draft model alone turns drafting on
            return [Knob(self.draft_model_flag, KnobKind.CHOICES, choices=(draft_model, None)), draft[1]]
        modes = (SPEC_OFF, DRAFT_TYPE, *(self.ngram_types if speculative else ()))
        return [Knob(SPEC_TYPE, KnobKind.CHOICES, choices=modes), *draft]

    def conditional(self, name: str, flags: dict[str, Any]) -> tuple[bool, Any] | None:
        """(tune it?, forced value) for the draft flags: only beside drafting with the model (the
        draft model is not even loaded otherwise); None for a flag not this module's."""
        if name not in (self.draft_model_flag, self.draft_max_flag):
            return None
        if SPEC_TYPE in flags and flags[SPEC_TYPE] != DRAFT_TYPE:
            return False, None
        if name == self.draft_max_flag and self.draft_model_flag in flags and flags[self.draft_model_flag] is None:
            return False, None
        return True, None
