"""Evidence for "the answer is right": spreads, ties within noise, and the named best.

The one line a user takes from kvtune is the best command line, so it must be named on
evidence: a figure is a mean with a 95% confidence half-width (Student t), two configs whose
intervals overlap are tied within noise, and a tie goes to the simpler config (fewer flags
changed from the server's defaults), the defaults themselves first, as vLLM's tuning recipes
prefer fewer overrides when throughputs are within noise. `converged` is the stopping rule of
``--repeats auto`` (AIPerf-style adaptive convergence). Pure: no I/O, no scipy.

The t quantiles are a table for 1..30 degrees of freedom; above 30 the normal 1.96 is used, which
understates the half-width by under 4% (t at df 31 is 2.040). A single measurement has no spread
of its own: where one is compared, a stated noise floor (a relative half-width, default 8%: the
median run-to-run noise measured on fresh servers on the reference 2-core machine) stands in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kvtune.kinds import Direction

# Two-sided 95% Student t quantiles, df = 1..30 (index df - 1).
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z95 = 1.96
# Relative half-width that stands in for the spread of a single measurement.
NOISE_FLOOR = 0.08


def t95(df: int) -> float:
    """Two-sided 95% t quantile for `df` degrees of freedom (1.96 above 30)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    return T95[df - 1] if df <= len(T95) else Z95


@dataclass(frozen=True)
class Estimate:
    """A mean with its 95% confidence half-width over `n` values (NaN when n == 1: unknown)."""

    mean: float
    half_width: float
    n: int

    def spread(self, noise: float = NOISE_FLOOR) -> float:
        """The half-width to compare with: the measured one from n >= 3 values; with fewer, the
        noise floor of a mean of n measurements, ``noise * |mean| / sqrt(n)`` (a t-interval from
        two values is 12.7 standard errors wide, too wide to tell any two configs apart)."""
        if self.n >= 3:
            return self.half_width
        return noise * abs(self.mean) / math.sqrt(max(self.n, 1))

    def format(self) -> str:
        """``136.6 +/- 3.1`` (or ``136.6 (measured once)``), as headline figures show it."""
        if self.n < 2:
            return f"{self.mean:.4g} (measured once)"
        if self.n < 3:  # the spread the tie rule uses: a two-value t-interval is 12.7 SE wide
            return f"{self.mean:.4g} +/- {self.spread():.2g} (noise floor, {self.n} runs)"
        return f"{self.mean:.4g} +/- {self.half_width:.2g}"


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
    return Estimate(mean, t95(n - 1) * sd / math.sqrt(n), n)


def overlap(a: Estimate, b: Estimate, noise: float = NOISE_FLOOR) -> bool:
    """Tied within noise: the intervals ``mean +/- spread`` touch, i.e.
    ``|a.mean - b.mean| <= a.spread + b.spread`` (a single measurement's spread is
    ``noise * |mean|``). This errs towards "tied": intervals that overlap do not prove two
    configs equal, but naming the simpler one then costs at most the noise."""
    return abs(a.mean - b.mean) <= a.spread(noise) + b.spread(noise)


def converged(values: Sequence[float], rel_half_width: float = 0.03, cap: int = 5) -> bool:
    """``--repeats auto``: enough repeats once the 95% half-width is within `rel_half_width` of
    the mean (at least 2 values), or once `cap` values were taken."""
    if cap < 1:
        raise ValueError(f"the repeat cap must be at least 1, got {cap}")
    if rel_half_width <= 0:
        raise ValueError(f"rel_half_width must be positive, got {rel_half_width}")
    if len(values) >= cap:
        return True
    if len(values) < 2:
        return False
    e = estimate(values)
    return e.half_width <= rel_half_width * abs(e.mean)


def simplicity(flags: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> int:
    """How many flags a config changes from the server's defaults (a baseline has 0).

    A flag set to None is not given. Without `defaults`, every given flag counts as a change;
    with them, a flag equal to its default (compared as given or as lower-case text, so ``512``
    matches ``"512"``) does not.
    """
    changed = 0
    for name, value in flags.items():
        if value is None:
            continue
        if defaults is not None and name in defaults and _same(value, defaults[name]):
            continue
        changed += 1
    return changed


def _same(a: Any, b: Any) -> bool:
    return a == b or str(a).strip().lower() == str(b).strip().lower()


@dataclass(frozen=True)
class Candidate:
    """A confirmed config: its trial number, its objective values (first measurement, repeats
    and confirmation), how many flags it changes, and whether it is the baseline (defaults)."""

    number: int
    values: Sequence[float]
    flags_changed: int
    baseline: bool = False


@dataclass(frozen=True)
class Decision:
    """The config to name, why (for people), and the trials tied within noise with the best by
    mean (other than the one named)."""

    number: int
    why: str
    tied_with: list[int] = field(default_factory=list)


def _flags(n: int) -> str:
    return f"{n} flag{'' if n == 1 else 's'} changed"


def choose_named_best(candidates: Sequence[Candidate], direction: Direction | str,
                      noise: float = NOISE_FLOOR) -> Decision:
    """Name the best of the confirmed `candidates` on evidence.

    Rank by mean. If the best ties the baseline within noise (`overlap`), name the baseline: no
    change beat the defaults by more than the noise. Otherwise, if candidates with fewer flags
    changed tie the best, name the one with the fewest (then the better mean): tied within
    noise. Ties are with the best itself, not chained through others. Else name the best.
    """
    if not candidates:
        raise ValueError("choose_named_best needs at least one candidate")
    if len({c.number for c in candidates}) != len(candidates):
        raise ValueError("candidate numbers must be distinct")
    if sum(c.baseline for c in candidates) > 1:
        raise ValueError("at most one candidate can be the baseline")
    sign = -1.0 if Direction(direction) is Direction.MAXIMIZE else 1.0
    est = {c.number: estimate(c.values) for c in candidates}
    ranked = sorted(candidates, key=lambda c: (sign * est[c.number].mean, c.flags_changed,
                                               c.number))
    best = ranked[0]
    tied = [c for c in ranked[1:] if overlap(est[best.number], est[c.number], noise)]

    def show(c: Candidate) -> str:
        name = "the defaults" if c.baseline else f"trial {c.number}"
        return f"{name} ({est[c.number].format()})"

    def others(chosen: Candidate) -> list[int]:
        return [c.number for c in [best, *tied] if c is not chosen]

    if best.baseline:
        return Decision(best.number, "no change beat the defaults: the defaults measured best",
                        others(best))
    base = next((c for c in tied if c.baseline), None)
    if base is not None:
        return Decision(base.number, f"no change beat the defaults by more than the noise: "
                        f"the best, {show(best)}, is tied within noise with {show(base)}",
                        others(base))
    simpler = [c for c in tied if c.flags_changed < best.flags_changed]
    if simpler:
        chosen = min(simpler, key=lambda c: c.flags_changed)  # stable: better mean first
        return Decision(chosen.number, f"tied within noise: {show(best)}, "
                        f"{_flags(best.flags_changed)}, and {show(chosen)}, "
                        f"{_flags(chosen.flags_changed)}; named the one with fewer flags changed",
                        others(chosen))
    if tied:
        names = ", ".join(f"trial {c.number}" for c in tied)
        return Decision(best.number, f"best by mean; tied within noise with {names}, none of "
                        f"which changes fewer flags", others(best))
    if len(ranked) == 1:
        return Decision(best.number, "the only confirmed config")
    return Decision(best.number, f"best by more than the noise: {show(best)} against "
                    f"{show(ranked[1])}")
