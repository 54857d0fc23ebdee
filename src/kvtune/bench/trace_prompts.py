"""Prompts for a replayed trace: each request's length, and the trace's prefix reuse made real.

A Mooncake trace names the 512-token blocks of each prompt by hash id: two requests that share
ids share those blocks (a conversation's history, a common system prompt). Here a block's text
depends only on (seed, run salt, hash id), so equal ids are equal token blocks at the same place
in the prompt and a prefix cache sees exactly the trace's reuse; the run salt keeps one run's
blocks from hitting the cache a previous run filled. With the model's single-token words
(tokenizer.py) every block is exactly `block_tokens` tokens and every prompt exactly its
trace length (chat template not counted); without them a word is about one token. A block cut
short (the prompt's last one, or a clipped prompt) is a prefix of the full block, as in the
trace. Requests with no hash ids (Azure, BurstGPT) get a unique prompt each: nothing to reuse.

Warm-up requests (indices below `warmup`) have the lengths of the trace's first requests but
unique text, so warming up primes no cache for the measured phase.
"""

from __future__ import annotations

import random

from kvtune.bench.prompts import _WORDS, Prompt, exact_prompt, synthetic_prompt
from kvtune.bench.traces import FittedTrace, TraceRequest


class TracePromptSource:
    """Request `i`'s prompt and output length for a fitted trace; `words` makes sizes exact."""

    def __init__(self, fitted: FittedTrace, seed: int, salt: str, warmup: int, words: list[str] | None = None) -> None:
        self.fitted = fitted
        self.seed, self.salt, self.warmup = seed, salt, warmup
        self.words = list(words or [])
        self.exact = bool(self.words)

    def request(self, index: int) -> TraceRequest:
        """The trace request behind `index` (a warm-up one borrows the lengths of request i mod n)."""
        reqs = self.fitted.requests
        j = index - self.warmup
        return reqs[(index if j < 0 else j) % len(reqs)]

    def output_tokens(self, index: int) -> int:
        return self.request(index).output_tokens

    def block(self, hash_id: int, tokens: int) -> str:
        """The text of hash-id block `hash_id`, its first `tokens` tokens (words)."""
        rng = random.Random(f"kvtune-trace-block:{self.seed}:{self.salt}:{hash_id}")
        return " ".join(rng.choices(self.words or _WORDS, k=tokens))

    def _unique(self, index: int, tokens: int, kind: str) -> str:
        if self.words:
            return exact_prompt(index, tokens, self.seed, self.words, salt=self.salt, kind=kind)
        return synthetic_prompt(index, tokens, self.seed, salt=f"{kind}:{self.salt}")

    def prompt(self, index: int) -> Prompt:
        r = self.request(index)
        if index < self.warmup or not r.hash_ids:
            kind = "trace-warmup" if index < self.warmup else "trace"
            return Prompt(user=self._unique(index, r.input_tokens, kind), tokens=r.input_tokens if self.exact else None)
        return Prompt(user=self.blocks_text(index, r), tokens=r.input_tokens if self.exact else None)

    def blocks_text(self, index: int, r: TraceRequest) -> str:
        """The prompt as the trace's blocks, cut to its length; a length past the blocks (a
        rounding of the scaled lengths) is made up by a unique tail."""
        size, left, parts = self.fitted.block_tokens, r.input_tokens, []
        for hash_id in r.hash_ids:
            if left <= 0:
                break
            n = min(size, left)
            parts.append(self.block(hash_id, n))
            left -= n
        if left > 0:
            parts.append(self._unique(index, left, "trace-tail"))
        return " ".join(parts)
