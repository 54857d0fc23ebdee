"""The user turns of a multi-turn workload's conversations: synthetic, or a ShareGPT file's.

A conversation's first turn opens with a nonce unique to the conversation and the run (as every
single-turn prompt does, prompts.py), and its later turns carry none: a conversation's requests
share their whole history as a prefix, so a server's prefix cache can serve it, while two
conversations (or two runs) share nothing but the chat template. Synthetic turns are
`prompt_tokens` each (exact with the model's single-token words, tokenizer.py; about one token a
word without); a ShareGPT record gives all its human turns, in order. Warm-up conversations have
negative indices, so warming up primes no cache the measured ones could hit.
"""

from __future__ import annotations

import random
from typing import Callable

from kvtune.bench.datasets import load_conversations
from kvtune.bench.prompts import _WORDS, PromptSource, exact_prompt, prompt_nonce, synthetic_prompt
from kvtune.workload import Workload


class ConversationSource:
    """Conversation `c`'s user turns and their token counts. `words` (single-token words) makes
    synthetic turns exact; `dataset` is the human turns of each record; `count` a token counter
    for dataset turns (words are counted without one)."""

    def __init__(
        self,
        workload: Workload,
        salt: str,
        *,
        words: list[str] | None = None,
        dataset: list[list[str]] | None = None,
        count: Callable[[str], int] | None = None,
        described: str = "",
    ) -> None:
        self.workload, self.salt = workload, salt
        self.words = list(words or [])
        self.dataset = dataset
        self.count = count
        self.exact = bool(self.words) if dataset is None else count is not None
        self._order = list(range(len(dataset or [])))
        random.Random(f"kvtune-conversations:{workload.seed}").shuffle(self._order)
        self._described = described
        # The system prompts: shared by groups of conversations, as single requests share them.
        self._systems = PromptSource(workload, salt, words=self.words or None)

    def system(self, c: int) -> str | None:
        """Conversation `c`'s system prompt (every turn carries it first), None without a
        shared-prefix part: `shared_prefix_fraction` of conversations share one of
        `shared_prefix_groups` prompts (conversation c is dealt as request c would be), the
        rest have a unique one of the same length, so only a prefix cache tells them apart."""
        return self._systems.system(c)[0]

    def turns(self, c: int) -> list[str]:
        """The user turns of conversation `c`, the first with the conversation's nonce."""
        w = self.workload
        if self.dataset:
            record = self.dataset[self._order[c % len(self._order)]]
            return [prompt_nonce(c, w.seed, self.salt) + record[0], *record[1:]]
        return [self._first(c)] + [self._later(c, k) for k in range(2, w.turns + 1)]

    def tokens(self, text: str) -> int:
        """Tokens of one turn's text: exact for synthetic turns with words or with a counter."""
        if self.count is not None:
            return self.count(text)
        return len(text.split())

    def _first(self, c: int) -> str:
        w = self.workload
        if self.words:
            return exact_prompt(c, w.prompt_tokens, w.seed, self.words, salt=self.salt, kind="conversation")
        return synthetic_prompt(c, w.prompt_tokens, w.seed, salt=f"conversation:{self.salt}")

    def _later(self, c: int, k: int) -> str:
        """Turn `k` (k >= 2) of conversation `c`: filler only, no nonce."""
        rng = random.Random(f"kvtune-turn:{self.workload.seed}:{c}:{k}")
        return " ".join(rng.choices(self.words or _WORDS, k=self.workload.prompt_tokens))

    def describe(self) -> str:
        w = self.workload
        if self.dataset:
            return f"multi-turn, {self._described}; each conversation's first turn opens with a unique nonce{self._shared()}"
        size = f"exactly {w.prompt_tokens}" if self.words else f"about {w.prompt_tokens}"
        think = f", {w.think_time_s:g} s think time" if w.think_time_s > 0 else ""
        return (
            f"multi-turn, synthetic: {w.turns} turns of {size} new tokens and {w.output_tokens} output "
            f"tokens each{think}; a nonce opens each conversation only{self._shared()}"
        )

    def _shared(self) -> str:
        w = self.workload
        if w.shared_prefix_fraction <= 0:
            return ""
        groups = f" in {w.shared_prefix_groups} groups" if w.shared_prefix_groups > 1 else ""
        return f"; a {w.shared_prefix_tokens}-token system prompt shared by {w.shared_prefix_fraction:.0%} of conversations{groups}"


def conversation_source(
    workload: Workload, salt: str, words: list[str], count: Callable[[str], int] | None
) -> ConversationSource:
    """The workload's conversations: from its ShareGPT dataset when it names one, else synthetic."""
    if workload.dataset is None:
        return ConversationSource(workload, salt, words=words)
    data = load_conversations(workload.dataset)
    return ConversationSource(workload, salt, dataset=data.conversations, count=count, described=data.describe())
