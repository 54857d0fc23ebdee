"""``--repeats auto``: when the runs of one config on its one server pin its figure down.

AIPerf-style adaptive convergence: the runs of a trial are repeated until the 95% half-width of
their mean is within a share of the mean, or a cap is reached. This is a precision rule for one
measurement, not a comparison of configs: which config is better is the verdict's
(src/kvtune/verdict/). Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy import stats as _st

# The cost objectives are arithmetic on a throughput (USD/hour over tokens/s): a bench run does
# not carry them (they are added after the repeats), so `--repeats auto` converges on the
# throughput they are computed from (the same relative half-width: cost = k / throughput).
CONVERGES_ON = {"cost_per_mtok": "output_throughput", "cost_per_mtok_total": "total_token_throughput"}


@dataclass(frozen=True)
class Estimate:
    """A mean of `n` values with its 95% Student t half-width (NaN when n == 1)."""

    mean: float
    half_width: float
    n: int


def estimate(values: Sequence[float]) -> Estimate:
    """Mean and 95% t half-width (sample standard deviation, n - 1) of finite values."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("an estimate needs at least one value")
    if not all(math.isfinite(v) for v in xs):
        raise ValueError(f"an estimate needs finite values, got {xs}")
    n = len(xs)
    mean = sum(xs) / n
    if n == 1:
        return Estimate(mean, math.nan, 1)
    sd = math.sqrt(sum((v - mean) ** 2 for v in xs) / (n - 1))
    return Estimate(mean, float(_st.t.ppf(0.975, n - 1)) * sd / math.sqrt(n), n)


def convergence_key(key: str) -> str:
    """The metrics key `--repeats auto` watches for objective `key` (a cost: its throughput)."""
    return CONVERGES_ON.get(key, key)


def converged(values: Sequence[float], rel_half_width: float = 0.03, cap: int = 5) -> bool:
    """Enough repeats once the 95% half-width of the finite values is within `rel_half_width` of
    their mean (at least 2 of them), or once `cap` values were taken. A run with no finite figure
    (+inf latency: its requests failed; NaN: the key is missing) has no spread to converge on: it
    does not count towards convergence, only towards the cap."""
    if cap < 1:
        raise ValueError(f"the repeat cap must be at least 1, got {cap}")
    if rel_half_width <= 0:
        raise ValueError(f"rel_half_width must be positive, got {rel_half_width}")
    if len(values) >= cap:
        return True
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(finite) < 2:
        return False
    e = estimate(finite)
    return e.half_width <= rel_half_width * abs(e.mean)
