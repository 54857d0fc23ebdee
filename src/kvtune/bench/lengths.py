"""Synthetic request lengths drawn per request: a lognormal of the workload's mean and spread.

Real prompts and answers are not all 200 and 64 tokens; a server tuned on constants never sees
the long tail that fills its slots. With ``prompt_spread`` / ``output_spread`` > 0 request `i`'s
lengths are drawn from a lognormal of that sigma of log whose mean is ``prompt_tokens`` /
``output_tokens``, from a generator seeded by (kind, workload seed, i) alone: two configs of a
comparison, and a warm-up and a rerun, get the same draws in any order. Each draw is clamped to
[1, `Workload` ``length_cap``] (the p99 that slots are sized for), so every request fits.
Spread 0 is the constant length, as before.
"""

from __future__ import annotations

import random

from kvtune.workload import Workload, length_cap, lognormal_mu, spread_words


def drawn_length(kind: str, mean: int, spread: float, seed: int, index: int) -> int:
    """Request `index`'s length: `mean` at spread 0, else a clamped, seeded lognormal draw."""
    if spread <= 0:
        return mean
    rng = random.Random(f"kvtune-length:{kind}:{seed}:{index}")
    x = rng.lognormvariate(lognormal_mu(mean, spread), spread)
    return min(length_cap(mean, spread), max(1, round(x)))


def prompt_length(workload: Workload, index: int) -> int:
    """Tokens of synthetic prompt text request `index` asks for (system prompt not counted)."""
    return drawn_length("prompt", workload.prompt_tokens, workload.prompt_spread, workload.seed, index)


def output_length(workload: Workload, index: int) -> int:
    """The output length request `index` forces (``max_tokens`` with ``ignore_eos``)."""
    return drawn_length("output", workload.output_tokens, workload.output_spread, workload.seed, index)


def prompt_size_words(workload: Workload) -> str:
    """The synthetic prompt length in words: "200" or "~lognormal(mean 200, sigma 0.5) up to 565"."""
    if workload.prompt_spread > 0:
        return spread_words(workload.prompt_tokens, workload.prompt_spread)
    return str(workload.prompt_tokens)
