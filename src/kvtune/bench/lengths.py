"""Synthetic request lengths drawn per request: a lognormal of the workload's mean and spread.

Real prompts and answers are not all 200 and 64 tokens; a server tuned on constants never sees
the long tail that fills its slots. With ``prompt_spread`` / ``output_spread`` > 0 request `i`'s
lengths are drawn from a lognormal of that sigma of log whose mean is ``prompt_tokens`` /
``output_tokens``, from a generator seeded by (kind, workload seed, i) alone: two configs of a
comparison, and a warm-up and a rerun, get the same draws in any order. Each draw is clamped to
[1, `Workload` ``length_cap``] (the p99 that slots are sized for), so every request fits.
Spread 0 is the constant length, as before. Think times are drawn the same way (`think_pause`:
mean ``think_time_s``, sigma ``think_spread``, seeded by the conversation and turn), so a closed
and an open loop, and two configs, pause alike.
"""

from __future__ import annotations

import random

from kvtune.workload import Workload, length_cap, lognormal_mu, spread_words
from kvtune.workload.lognormal import lognormal_p99


def _draw(kind: str, mean: float, spread: float, seed: int, key: object) -> float:
    """One lognormal draw of this mean and sigma of log, from a generator seeded by (kind, seed,
    key) alone: the same draw whichever config, phase or order asks for it."""
    rng = random.Random(f"kvtune-length:{kind}:{seed}:{key}")
    return rng.lognormvariate(lognormal_mu(mean, spread), spread)


def drawn_length(kind: str, mean: int, spread: float, seed: int, index: int) -> int:
    """Request `index`'s length: `mean` at spread 0, else a clamped, seeded lognormal draw."""
    if spread <= 0:
        return mean
    return min(length_cap(mean, spread), max(1, round(_draw(kind, mean, spread, seed, index))))


def think_pause(workload: Workload, conversation: int, turn: int) -> float:
    """Seconds a user thinks before turn `turn` of `conversation`: ``think_time_s`` at spread 0,
    else a seeded lognormal draw of that mean, clamped to its p99 (one rare draw would stall
    the run: a pause is load the server does not get)."""
    mean, spread = workload.think_time_s, workload.think_spread
    if spread <= 0 or mean <= 0:
        return mean
    x = _draw("think", mean, spread, workload.seed, f"{conversation}:{turn}")
    return min(lognormal_p99(mean, spread), x)


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
