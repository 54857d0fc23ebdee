"""Group-sequential critical values: a test that may stop at any of its looks and still errs at
most alpha.

Confirmation looks at its evidence every few pairs and stops as soon as the answer is clear.
Testing each look at the plain 5% level would name a false winner far more often (a Monte Carlo
of a test repeated after every pair: 9.7% where one test at the end gives 5.2%), so each look k
gets its own critical value c_k, chosen so that the chance of crossing any of them when nothing
differs is alpha in all. The alpha is spent over the looks with the Lan-DeMets Pocock-type function
``alpha(t) = alpha * ln(1 + (e - 1) t)`` (t: the share of the cap's pairs measured): early looks
get a real share of it, so a large effect (the demo's latency target) stops at the first look,
while the last look keeps most of a fixed-n test's power.

The statistics are Student t on log figures, whose null distribution does not depend on the
noise's size, so the c_k are computed once, by simulating that null exactly (normal logs, fresh
measurements at each look accumulating), with a fixed seed: the same boundaries on every machine.
A futility stop (the candidate measured no better than the defaults) only ever stops a test that
did not cross, so it is non-binding and the error rate stays at or below alpha.
"""

from __future__ import annotations

import math
from enum import Enum
from functools import lru_cache

import numpy as np

SIMULATIONS = 200_000
SEED = 20261203


class Statistic(str, Enum):
    """Which t the looks compute: candidate vs defaults (two arms of n runs each, pooled variance,
    2n - 2 degrees of freedom), or one arm against a fixed bound (n runs, n - 1 dof)."""

    TWO_SAMPLE = "two-sample"
    ONE_SAMPLE = "one-sample"


def looks(cap: int, every: int) -> tuple[int, ...]:
    """The pair counts at which the evidence is judged: every `every` pairs, and at the cap."""
    if cap < 1 or every < 1:
        raise ValueError(f"the cap and the look interval must be at least 1, got {cap} and {every}")
    points = list(range(every, cap + 1, every))
    if not points or points[-1] != cap:
        points.append(cap)
    return tuple(points)


def spent(alpha: float, fraction: float) -> float:
    """Lan-DeMets Pocock-type spending: the share of `alpha` used up by information `fraction`."""
    return alpha * math.log(1 + (math.e - 1) * min(max(fraction, 0.0), 1.0))


def _null_statistics(kind: Statistic, points: tuple[int, ...]) -> np.ndarray:
    """Simulated t at each look under the null (rows: simulations, columns: looks)."""
    rng = np.random.default_rng(SEED)
    n_max = points[-1]
    a = rng.standard_normal((SIMULATIONS, n_max))
    out = np.empty((SIMULATIONS, len(points)))
    if kind is Statistic.TWO_SAMPLE:
        b = rng.standard_normal((SIMULATIONS, n_max))
        for j, n in enumerate(points):
            xa, xb = a[:, :n], b[:, :n]
            diff = xa.mean(axis=1) - xb.mean(axis=1)
            if n < 2:
                out[:, j] = np.inf * np.sign(diff)  # no spread to judge: never crossed (see value)
                continue
            var = (xa.var(axis=1, ddof=1) + xb.var(axis=1, ddof=1)) / 2
            out[:, j] = diff / np.sqrt(var * 2 / n)
    else:
        for j, n in enumerate(points):
            xa = a[:, :n]
            if n < 2:
                out[:, j] = np.inf * np.sign(xa[:, 0])
                continue
            out[:, j] = xa.mean(axis=1) / (xa.std(axis=1, ddof=1) / math.sqrt(n))
    return out


@lru_cache(maxsize=64)
def critical_values(kind: Statistic, cap: int, every: int, alpha: float = 0.05) -> tuple[float, ...]:
    """One-sided critical value of each look (`looks(cap, every)`): crossing c_k at look k, with
    no earlier crossing, has probability alpha(t_k) - alpha(t_(k-1)) under the null. A look with
    too few runs for a spread (one run per arm) gets +inf: it can never decide."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    points = looks(cap, every)
    stats = _null_statistics(kind, points)
    alive = np.ones(SIMULATIONS, dtype=bool)
    values: list[float] = []
    previous = 0.0
    for j, n in enumerate(points):
        share = spent(alpha, n / cap)
        budget = (share - previous) * SIMULATIONS
        previous = share
        column = np.where(alive, stats[:, j], -np.inf)
        if n < 2 or budget < 1:
            values.append(math.inf)
            continue
        finite = np.sort(column[np.isfinite(column)])[::-1]
        k = int(budget)
        c = float(finite[k]) if k < finite.size else math.inf
        values.append(c)
        alive &= ~(stats[:, j] > c)
    return tuple(values)


def boundary(kind: Statistic, n: int, cap: int, every: int, alpha: float = 0.05) -> float | None:
    """The critical value at `n` pairs when `n` is a look of the design, else None."""
    points = looks(cap, every)
    if n not in points:
        return None
    return critical_values(kind, cap, every, alpha)[points.index(n)]
