"""Synthetic prompts of a requested size, each opening with a unique nonce.

Benchmarks need prompts of a known length that no server cache can shortcut: a shared prefix
across requests (or across runs against the same server) would hit the prefix/KV cache and make
prefill look free. Every prompt therefore starts with a nonce, and the rest is filler made of
common English words so its token count is predictable without loading a tokenizer.
"""

from __future__ import annotations

import hashlib
import random

# Common lowercase English words; each is about one token (with its leading space) for
# llama-style BPE tokenizers (Llama 3, Qwen, Mistral).
_WORDS = (
    "the people time year way day man thing woman life child world school state family "
    "student group country problem hand part place case week company system program question "
    "work government number night point home water room mother area money story fact month "
    "lot right study book eye job word business issue side kind head house service friend "
    "father power hour game line end member law car city community name president team "
    "minute idea kid body information back parent face others level office door health "
    "person art war history party result change morning reason research girl guy moment air "
    "teacher force education good new first last long great little own other old big high "
    "different small large next early young important few public bad same able"
).split()

# Rough token cost of the nonce "[req-S-I-xxxxxxxx] " itself, subtracted from the filler.
_NONCE_TOKENS = 10


def prompt_nonce(index: int, seed: int, salt: str = "") -> str:
    """The unique prefix of prompt `index`: ``"[req-<seed>-<index>-<8 hex>] "``."""
    digest = hashlib.sha256(f"{seed}:{index}:{salt}".encode()).hexdigest()[:8]
    return f"[req-{seed}-{index}-{digest}] "


def synthetic_prompt(index: int, prompt_tokens: int, seed: int, *, salt: str = "") -> str:
    """A prompt of approximately `prompt_tokens` tokens, deterministic given (index, seed, salt).

    The size is an approximation: the nonce costs about ten tokens and each filler word (common
    lowercase English) about one token for llama-style BPE tokenizers; the chat template adds a
    few more. The server's real count comes back in ``usage.prompt_tokens``. The nonce at the
    very start makes every (index, seed, salt) prompt differ from its first token, which defeats
    prefix caching; pass a fresh `salt` per run to also avoid hits across repeated runs. The
    filler words depend only on (index, seed), so runs with different salts do the same work.
    """
    rng = random.Random(f"kvtune-prompt:{seed}:{index}")
    n_words = max(1, prompt_tokens - _NONCE_TOKENS)
    return prompt_nonce(index, seed, salt) + " ".join(rng.choices(_WORDS, k=n_words))
