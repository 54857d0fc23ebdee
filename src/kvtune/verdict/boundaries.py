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

The gain itself is judged on a trimmed statistic (`Statistic.TRIMMED`, stats.py `trimmed`): the
candidate's best run and the defaults' worst are set aside, so one undetected outlier in the
direction of a false win, of any size, on either arm, cannot carry the test. It spends its
alpha late (O'Brien-Fleming-type, `spent_late`), and its c_k hold alpha
in three worlds at once (no outlier, one unbounded outlier up among the candidate's runs, one
unbounded outlier down among the defaults'): each look's value is the largest of the three
worlds' own, so the chance of a false win is at most alpha in each of them. A bounded outlier
(x1.5 at 20% noise) is set aside as well, or is too small to matter; benchmarks/verdicts.py
measures it.
"""

from __future__ import annotations

import math
from enum import Enum
from functools import lru_cache
from statistics import NormalDist

import numpy as np

SIMULATIONS = 200_000
SEED = 20261203


class Statistic(str, Enum):
    """Which t the looks compute: candidate vs defaults (two arms of n runs each, pooled variance,
    2n - 2 degrees of freedom), or one arm against a fixed bound (n runs, n - 1 dof)."""

    TWO_SAMPLE = "two-sample"
    ONE_SAMPLE = "one-sample"
    TRIMMED = "two-sample, the candidate's best run and the defaults' worst set aside"


# One unbounded outlier (in standard deviations): large enough that trimming always removes it.
_UNBOUNDED = 1e3


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


def spent_late(alpha: float, fraction: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type spending, ``2 - 2 Phi(z_(alpha/2) / sqrt(t))``: almost
    nothing at the first look, nearly all of `alpha` at the cap. The trimmed statistic's: with 3
    runs per arm it judges 2 against 2 (2 degrees of freedom), too few to stop on, so its alpha is
    better kept for the looks that can use it (a Monte Carlo of the proof alone, 100,000 draws:
    +20% at 10% noise is detected in 93.5% of proofs with it, 88.2% with Pocock-type spending,
    94.2% by the untrimmed t)."""
    t = min(max(fraction, 0.0), 1.0)
    if t <= 0:
        return 0.0
    normal = NormalDist()
    return 2 * (1 - normal.cdf(normal.inv_cdf(1 - alpha / 2) / math.sqrt(t)))


def _pooled_t(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pooled two-sample t of each row of `a` over the same row of `b`."""
    na, nb = a.shape[1], b.shape[1]
    var = ((na - 1) * a.var(axis=1, ddof=1) + (nb - 1) * b.var(axis=1, ddof=1)) / (na + nb - 2)
    return (a.mean(axis=1) - b.mean(axis=1)) / np.sqrt(var * (1 / na + 1 / nb))


def _trimmed_null(points: tuple[int, ...], world: int) -> np.ndarray:
    """Trimmed t at each look under the null in one of the three worlds (0: no outlier, 1: one
    unbounded outlier up among the candidate's runs, 2: one down among the defaults')."""
    rng = np.random.default_rng(SEED + world)
    n_max = points[-1]
    a = rng.standard_normal((SIMULATIONS, n_max))
    b = rng.standard_normal((SIMULATIONS, n_max))
    if world == 1:
        a[:, 0] += _UNBOUNDED
    elif world == 2:
        b[:, 0] -= _UNBOUNDED
    out = np.empty((SIMULATIONS, len(points)))
    for j, n in enumerate(points):
        if n < 3:
            out[:, j] = np.inf  # one run per arm left: no spread (see critical_values)
            continue
        xa = np.sort(a[:, :n], axis=1)[:, :-1]
        xb = np.sort(b[:, :n], axis=1)[:, 1:]
        out[:, j] = _pooled_t(xa, xb)
    return out


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
    too few runs for a spread (one run per arm) gets +inf: it can never decide. `TRIMMED`: the
    largest of its three worlds' values at each look (the module's docstring)."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    points = looks(cap, every)
    if kind is Statistic.TRIMMED:
        worlds = [_spend(_trimmed_null(points, w), points, cap, alpha, trimmed=True) for w in range(3)]
        return tuple(max(values) for values in zip(*worlds))
    return _spend(_null_statistics(kind, points), points, cap, alpha)


def _spend(
    stats: np.ndarray, points: tuple[int, ...], cap: int, alpha: float, trimmed: bool = False
) -> tuple[float, ...]:
    """The c_k that spend alpha over the looks on the simulated null statistics `stats`
    (Pocock-type spending, `spent_late` for the trimmed statistic)."""
    fewest = 3 if trimmed else 2  # runs per arm for a spread (trimming sets one aside)
    spending = spent_late if trimmed else spent
    alive = np.ones(SIMULATIONS, dtype=bool)
    values: list[float] = []
    previous = 0.0
    for j, n in enumerate(points):
        share = spending(alpha, n / cap)
        budget = (share - previous) * SIMULATIONS
        previous = share
        column = np.where(alive, stats[:, j], -np.inf)
        if n < fewest or budget < 1:
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
