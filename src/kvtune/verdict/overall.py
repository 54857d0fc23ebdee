"""Best overall: which of several configs, each the one its own study's verdict named, is better.

`kvtune compare` and a run with several backends put studies side by side. Each side is the
config its study named and the fresh runs its verdict judged it on (the proof runs); the sides
are compared with the verdict's own test, the pooled two-sample t on log figures
(verdict/stats.py `compare`), once, on runs all measured already (a fixed n: no looks to spend
alpha on). The side with the better geometric mean is named only when it is shown better than
every other side at one-sided alpha / k (k sides: which side comes out on top was seen before
testing, so each of the k is given alpha / k; for two sides that is the two-sided test at
alpha). Otherwise no side is named, and each side is shown with its interval. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from kvtune.verdict.evidence import ALPHA
from kvtune.verdict.stats import CONFIDENCE, Comparison, compare, level


@dataclass(frozen=True)
class Spread:
    """One side's fresh figures: their geometric mean with its 95% interval (None below 2 runs)."""

    n: int
    center: float
    low: float | None
    high: float | None

    def text(self) -> str:
        """``54.5 [51.2, 58.0], 6 fresh runs`` (one run: no interval)."""
        runs = f"{self.n} fresh run{'' if self.n == 1 else 's'}"
        if self.low is None or self.high is None:
            return f"{self.center:.4g}, {runs} (no interval from one run)"
        return f"{self.center:.4g} [{self.low:.4g}, {self.high:.4g}], {runs}"


def spread(values: Sequence[float]) -> Spread | None:
    lvl = level(values)
    if lvl is None:
        return None
    center, low, high = lvl.interval(CONFIDENCE)
    return Spread(lvl.n, center, low, high) if lvl.n >= 2 else Spread(1, center, None, None)


@dataclass(frozen=True)
class Overall:
    """The answer: `winner` (None: `top` was not shown better than `rival`); `top`, the side with
    the better geometric mean; `rival`, the other side it was least clearly better than; the
    ratio of `top` over `rival` with its interval at the test's confidence."""

    winner: str | None
    top: str
    rival: str
    ratio: float
    low: float
    high: float
    confidence: float

    def ratio_text(self) -> str:
        """``+15.0% [+6.1%, +24.6%] (96% interval)``"""
        pct = [(x - 1) * 100 for x in (self.ratio, self.low, self.high)]
        return f"{pct[0]:+.1f}% [{pct[1]:+.1f}%, {pct[2]:+.1f}%] ({self.confidence:.0%} interval)"


def best_overall(sides: Mapping[str, Sequence[float]], maximize: bool, alpha: float = ALPHA) -> Overall:
    """Test the side with the better geometric mean against every other side (`sides`: name ->
    its positive fresh figures, two sides or more, each with one figure or more)."""
    if len(sides) < 2 or any(not v for v in sides.values()):
        raise ValueError("best_overall needs two sides or more, each with a fresh figure")
    sign = 1.0 if maximize else -1.0
    center = {name: sum(math.log(v) for v in values) / len(values) for name, values in sides.items()}
    ranked = sorted(sides, key=lambda name: -sign * center[name])
    top = ranked[0]
    confidence = 1 - 2 * alpha / len(sides)
    worst: tuple[float, str, Comparison] | None = None
    for other in ranked[1:]:
        comp = compare(sides[top], sides[other])
        assert comp is not None  # both sides have a figure
        low, high = comp.interval(confidence) if comp.dof >= 1 else (-math.inf, math.inf)
        margin = low if maximize else -high  # > 0: the top is shown better than `other`
        if worst is None or margin < worst[0]:
            worst = (margin, other, comp)
    assert worst is not None
    margin, rival, comp = worst
    low, high = comp.interval(confidence) if comp.dof >= 1 else (-math.inf, math.inf)
    return Overall(
        top if margin > 0 else None, top, rival, math.exp(comp.diff), math.exp(low), math.exp(high), confidence
    )
