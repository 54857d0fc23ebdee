"""Prompts of a requested size, each opening with a unique nonce, and the shared-prefix workload.

Benchmarks need prompts of a known length that no server cache can shortcut: a shared prefix
across requests (or across runs against the same server) would hit the prefix/KV cache and make
prefill look free. Every prompt therefore starts with a nonce, and the rest is filler.

- `synthetic_prompt`: filler of common English words, about one token each for llama-style BPE
  tokenizers (an approximation; no tokenizer needed).
- `exact_prompt`: with a tokenizer's single-token words (see tokenizer.py) the nonce is made of
  words too, and the prompt text is exactly `prompt_tokens` tokens.
- `PromptSource`: what the client asks for request `i`. It draws from a dataset or synthesizes,
  and in the shared-prefix workload adds a system prompt of `shared_prefix_tokens`: the same
  one for `shared_prefix_fraction` of requests (spread evenly) and a unique one, of the same
  length, for the others, so every request does the same work and only a prefix cache can tell
  them apart. With `shared_prefix_groups` k > 1 the sharing requests are dealt round-robin
  among k shared system prompts (`shared_prefix_group`), so k subsets of requests each reuse
  their own prefix, as a server's tenants or apps do. Synthetic lengths are drawn per request
  when the workload has a spread (lengths.py).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from kvtune.bench.lengths import output_length, prompt_length
from kvtune.workload import Workload

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
# Words in the nonce of an exact prompt.
_WORD_NONCE = 3


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


def _h(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def word_nonce(index: int, seed: int, words: list[str], salt: str = "") -> list[str]:
    """Three words unique to (index, seed, salt): the first differs for any `len(words)`
    consecutive indices, the second changes every `len(words)` indices, the third is hashed."""
    n = len(words)
    base = _h(f"{seed}:{salt}")
    return [words[(base + index) % n], words[(base // n + index // n) % n], words[_h(f"{seed}:{index}:{salt}") % n]]


def exact_prompt(
    index: int, prompt_tokens: int, seed: int, words: list[str], *, salt: str = "", kind: str = "prompt"
) -> str:
    """Exactly `prompt_tokens` single-token words: a word nonce, then filler.

    `words` must be single-token words of the target tokenizer (`Tokenizer.single_token_words`),
    so the text is exactly `prompt_tokens` tokens (chat template and BOS not counted). As with
    `synthetic_prompt`, the filler depends only on (index, seed, kind), the nonce also on salt.
    """
    if not words:
        raise ValueError("exact_prompt needs a non-empty list of single-token words")
    nonce = word_nonce(index, seed, words, f"{kind}:{salt}")[:prompt_tokens]
    rng = random.Random(f"kvtune-exact:{kind}:{seed}:{index}")
    filler = rng.choices(words, k=max(0, prompt_tokens - len(nonce)))
    return " ".join(nonce + filler)


def shared_prefix_member(index: int, fraction: float) -> bool:
    """Whether request `index` carries the shared system prompt: exactly `fraction` of any run
    of consecutive indices (to within one), spread evenly."""
    if fraction <= 0:
        return False
    if fraction >= 1:
        return True
    return int((index + 1) * fraction) > int(index * fraction)


def shared_prefix_group(index: int, fraction: float, groups: int) -> int:
    """The group of member request `index`: the j-th sharing request (counting from 0) gets
    j % `groups`, so each group gets every k-th sharer (whatever `fraction` spaces them by)
    and the groups' sizes differ by one at most."""
    j = index if fraction >= 1 else int((index + 1) * fraction) - 1
    return j % groups


@dataclass(frozen=True)
class Prompt:
    """One request's text. `system` is None unless the workload has a shared-prefix part."""

    user: str
    system: str | None = None
    shared_prefix: bool = False
    group: int | None = None  # which shared system prompt, for a sharing request
    # Exact tokens of the prompt text (system + user, no template) when a tokenizer knows them.
    tokens: int | None = None

    def as_text(self) -> str:
        """The completions-endpoint prompt: system text, a space, then the user text."""
        return self.user if self.system is None else f"{self.system} {self.user}"


class PromptSource:
    """Request `i`'s prompt for a workload, from a dataset or synthesized, with or without a
    shared system prompt. `words` (single-token words) makes synthetic prompts exact;
    `dataset` is the filtered prompt list from datasets.py; `count` an optional exact counter."""

    def __init__(
        self,
        workload: Workload,
        salt: str,
        *,
        words: list[str] | None = None,
        dataset: list[str] | None = None,
        count=None,
    ) -> None:
        self.workload = workload
        self.salt = salt
        self.words = list(words or [])
        self.dataset = dataset
        self.count = count
        self.exact = bool(self.words) if dataset is None else count is not None
        order = list(range(len(dataset))) if dataset else []
        random.Random(f"kvtune-dataset:{workload.seed}").shuffle(order)
        self._order = order

    def _text(self, index: int, tokens: int, kind: str) -> str:
        w = self.workload
        if self.words:
            return exact_prompt(index, tokens, w.seed, self.words, salt=self.salt, kind=kind)
        if kind == "prompt":
            return synthetic_prompt(index, tokens, w.seed, salt=self.salt)
        # A system prompt: its own nonce so it never equals a request's user text.
        body = synthetic_prompt(index, tokens, w.seed, salt=f"{kind}:{self.salt}")
        return "[sys" + body[4:]

    def _user(self, index: int) -> str:
        if self.dataset is None:
            return self._text(index, prompt_length(self.workload, index), "prompt")
        text = self.dataset[self._order[index % len(self._order)]]
        # Dataset prompts repeat when the run outlasts the file: the nonce keeps them apart.
        return prompt_nonce(index, self.workload.seed, self.salt) + text

    def output_tokens(self, index: int) -> int:
        """Request `index`'s forced output length: drawn when `output_spread` > 0 (lengths.py)."""
        return output_length(self.workload, index)

    def system(self, index: int) -> tuple[str | None, bool, int | None]:
        """Request (or conversation) `index`'s system prompt, whether it is a shared one, and
        its group: None, False, None without a shared-prefix part. Group g's shared prompt is
        the same for the whole run (key -1 - g, never a request's index); the others are unique."""
        w = self.workload
        if not (w.shared_prefix_fraction > 0 and w.shared_prefix_tokens > 0):
            return None, False, None
        shared = shared_prefix_member(index, w.shared_prefix_fraction)
        group = shared_prefix_group(index, w.shared_prefix_fraction, w.shared_prefix_groups) if shared else None
        key = index if group is None else -1 - group
        return self._text(key, w.shared_prefix_tokens, "shared" if shared else "system"), shared, group

    def prompt(self, index: int) -> Prompt:
        w = self.workload
        user = self._user(index)
        system, shared, group = self.system(index)
        tokens = None
        if self.dataset is None and self.words:
            tokens = prompt_length(w, index) + (w.shared_prefix_tokens if system is not None else 0)
        elif self.count is not None:
            tokens = self.count(user) + (self.count(system) if system is not None else 0)
        return Prompt(user=user, system=system, shared_prefix=shared, group=group, tokens=tokens)
