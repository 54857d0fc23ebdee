"""The t statistics, intervals and detectable effects the verdict is made of (pure).

Everything is on log figures: run-to-run noise on a server is multiplicative (a stolen core
slows every request by a share), so the spread of ``ln(x)`` is one number for configs of any
scale and an effect is a ratio. The candidate and the defaults are two arms of fresh runs; their
comparison is the pooled two-sample t on the log values (equal variance: one machine, one
workload), whose 2n - 2 degrees of freedom beat a paired t's n - 1 at the few runs a study can
afford. The run order (D W W D ...) balances slow drift between the arms, so drift does not bias
the difference; it only widens the spread, which errs towards "not shown".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy import stats as _st

CONFIDENCE = 0.95  # every interval printed
POWER = 0.80  # the power the minimum detectable effect is stated at


def logs(values: Sequence[float]) -> list[float]:
    """Natural logs of positive finite figures (the caller has dropped the others)."""
    return [math.log(v) for v in values]


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def variance(xs: Sequence[float]) -> float:
    """Sample variance (n - 1); 0 for a single value."""
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def t_quantile(p: float, dof: int) -> float:
    return float(_st.t.ppf(p, dof)) if dof >= 1 else math.inf


@dataclass(frozen=True)
class Comparison:
    """Candidate arm vs defaults arm on one metric, in logs: the difference of means, its
    standard error from the pooled spread, the dof, and the pooled SD itself."""

    diff: float
    se: float
    dof: int
    sd: float
    n: int  # runs per arm (the smaller arm when they differ)

    def t(self, shift: float = 0.0) -> float:
        """(diff - shift) / se; +/-inf when the spread is zero (identical runs)."""
        if self.se > 0:
            return (self.diff - shift) / self.se
        return math.copysign(math.inf, self.diff - shift) if self.diff != shift else 0.0

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """Two-sided interval of the difference of log means (fixed-n Student t)."""
        half = t_quantile(0.5 + confidence / 2, self.dof) * self.se
        return self.diff - half, self.diff + half

    def ratio(self) -> tuple[float, float, float]:
        """The candidate over the defaults as a ratio, with its 95% interval."""
        low, high = self.interval()
        return math.exp(self.diff), math.exp(low), math.exp(high)


def compare(candidate: Sequence[float], defaults: Sequence[float]) -> Comparison | None:
    """Pooled two-sample comparison of positive figures; None without a run on each side."""
    a, b = logs(candidate), logs(defaults)
    if not a or not b:
        return None
    dof = len(a) + len(b) - 2
    pooled = ((len(a) - 1) * variance(a) + (len(b) - 1) * variance(b)) / dof if dof > 0 else 0.0
    se = math.sqrt(pooled * (1 / len(a) + 1 / len(b)))
    return Comparison(mean(a) - mean(b), se, dof, math.sqrt(pooled), min(len(a), len(b)))


def trimmed(candidate: Sequence[float], defaults: Sequence[float], maximize: bool) -> Comparison | None:
    """`compare` with the candidate's best run and the defaults' worst set aside (best: the
    highest figure when `maximize`, else the lowest); None with fewer than 3 runs on a side.

    Why: the gain is a claim that the candidate is better, and the one run that could fake it is
    a lucky candidate run or an unlucky defaults run. Setting exactly those aside bounds what one
    undetected outlier can do to the test, whatever its size; the group-sequential critical
    values of this statistic are simulated for it (boundaries.py, `Statistic.TRIMMED`)."""
    if len(candidate) < 3 or len(defaults) < 3:
        return None
    a, b = sorted(candidate), sorted(defaults)
    a, b = (a[:-1], b[1:]) if maximize else (a[1:], b[:-1])
    return compare(a, b)


@dataclass(frozen=True)
class Level:
    """One arm's log figures against a fixed bound: geometric mean, standard error, dof."""

    center: float
    se: float
    dof: int
    n: int

    def t(self, bound: float) -> float:
        """(ln bound - center) / se: positive when the arm is below the bound."""
        gap = math.log(bound) - self.center
        if self.se > 0:
            return gap / self.se
        return math.copysign(math.inf, gap) if gap else 0.0

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
        """Geometric mean and its two-sided interval, in the metric's own unit."""
        half = t_quantile(0.5 + confidence / 2, self.dof) * self.se
        return math.exp(self.center), math.exp(self.center - half), math.exp(self.center + half)


def level(values: Sequence[float]) -> Level | None:
    xs = logs(values)
    if not xs:
        return None
    return Level(mean(xs), math.sqrt(variance(xs) / len(xs)), len(xs) - 1, len(xs))


def detectable(sd: float, n: int, critical: float, power: float = POWER) -> float | None:
    """The smallest gain (a ratio minus 1) that `n` runs per arm detect with `power`, for a
    one-sided test at `critical`: exp((c + t_power) * sd * sqrt(2 / n)) - 1 (Pinpoint's and
    MEASUREMENT.md's rule); None when it cannot be said (no spread measured, or one run)."""
    dof = 2 * n - 2
    if n < 2 or not math.isfinite(critical) or sd <= 0:
        return None
    return math.exp((critical + t_quantile(power, dof)) * sd * math.sqrt(2 / n)) - 1
