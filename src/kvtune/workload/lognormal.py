"""The lognormal a workload draws its spread quantities from: prompt and output lengths
(bench/lengths.py) and think times. Given as a mean and a sigma of log, because a user knows the
mean (200 tokens, 2 s) and a spread, not the mu of log; every draw is clamped to the p99 so one
rare draw neither overflows a slot sized for the p99 nor stalls a run for minutes.
"""

from __future__ import annotations

import math

Z99 = 2.3263478740408408  # the standard normal's 99th percentile


def lognormal_mu(mean: float, sigma: float) -> float:
    """The mu of log of the lognormal whose mean is `mean` at this `sigma`: E = exp(mu + sigma²/2)."""
    return math.log(mean) - sigma * sigma / 2


def lognormal_p99(mean: float, sigma: float) -> float:
    """The lognormal's 99th percentile, never below the mean itself; `mean` at sigma 0."""
    if sigma <= 0:
        return mean
    return max(mean, math.exp(lognormal_mu(mean, sigma) + Z99 * sigma))


def length_cap(mean: int, spread: float) -> int:
    """The largest length a request draws (and the one a slot is sized for): the lognormal's
    p99, never below the mean itself; `mean` when spread is 0 (the constant length)."""
    if spread <= 0:
        return mean
    return math.ceil(lognormal_p99(mean, spread))


def spread_words(mean: int, spread: float) -> str:
    """A drawn length in words, for describe(): "~lognormal(mean 200, sigma 0.5) up to 565"."""
    return f"~lognormal(mean {mean}, sigma {spread:g}) up to {length_cap(mean, spread)}"


def think_words(mean_s: float, spread: float) -> str:
    """A user's pause in words: "2 s think time" or "think time ~lognormal(mean 2 s, sigma 0.5)
    up to 5.7 s"; empty without think time."""
    if mean_s <= 0:
        return ""
    if spread <= 0:
        return f"{mean_s:g} s think time"
    return f"think time ~lognormal(mean {mean_s:g} s, sigma {spread:g}) up to {lognormal_p99(mean_s, spread):.3g} s"
