"""Evidence for "the answer is right": estimates, ties within noise, and the named best.

The one line a user takes from kvtune is the best command line, so it must be named on
evidence: a figure is a mean with a 95% half-width, two configs whose difference is within the
noise are tied, and a tie goes to the simpler config (fewer flags and environment variables
changed from the server's defaults), the defaults themselves first, as vLLM's tuning recipes
prefer fewer overrides when throughputs are within noise. `converged` is the stopping rule of
``--repeats auto`` (AIPerf-style adaptive convergence). Pure: no I/O, no scipy.

The noise is the study's own (`objectives.noise`: the spread of repeated measurements, pooled
over configs); a fixed prior stands in only before anything was measured twice, and every
figure formatted here says which it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kvtune.kinds import Direction
from kvtune.objectives.noise import PRIOR, T95, Z95, Noise, t95

__all__ = [
    "T95",
    "Z95",
    "t95",
    "Estimate",
    "estimate",
    "overlap",
    "converged",
    "convergence_key",
    "simplicity",
    "changed_from_defaults",
    "ConfirmedConfig",
    "Decision",
    "choose_named_best",
]

# The cost objectives are arithmetic on a throughput (USD/hour over tokens/s): a bench run does
# not carry them (they are added after the repeats), so `--repeats auto` converges on the
# throughput they are computed from (the same relative half-width: cost = k / throughput).
CONVERGES_ON = {"cost_per_mtok": "output_throughput", "cost_per_mtok_total": "total_token_throughput"}


@dataclass(frozen=True)
class Estimate:
    """A mean of `n` measurements of one config (`half_width`: their own 95% t half-width, NaN
    when n == 1). Comparisons and the printed +/- use the study's pooled noise (`spread`)."""

    mean: float
    half_width: float
    n: int

    def spread(self, noise: Noise = PRIOR) -> float:
        """The 95% half-width of this mean from the study's noise: ``t * s * |mean| / sqrt(n)``
        (pooled over every config measured twice, so even one value has an honest spread)."""
        return noise.half_width(self.mean, self.n)

    def format(self, noise: Noise = PRIOR) -> str:
        """``136.6 +/- 3.1 (pooled noise 4.3%, 6 dof)``: the mean, its half-width and where the
        half-width came from (``prior ..., not measured`` before any repeat exists)."""
        return f"{self.mean:.4g} +/- {self.spread(noise):.2g} ({noise.source()})"


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


def overlap(a: Estimate, b: Estimate, noise: Noise = PRIOR) -> bool:
    """Tied within noise: the 95% interval of the difference of the two means contains zero,
    ``|ln(a/b)| <= t * s * sqrt(1/n_a + 1/n_b)`` with the study's pooled log-SD `s` (its dof's
    t, the normal's under the prior). On the log scale because the noise is relative; a mean
    that is not positive is compared on the linear scale, relative to the larger magnitude."""
    width = noise.t() * noise.rel_sd * math.sqrt(1 / max(a.n, 1) + 1 / max(b.n, 1))
    if a.mean > 0 and b.mean > 0:
        return abs(math.log(a.mean / b.mean)) <= width
    return abs(a.mean - b.mean) <= width * max(abs(a.mean), abs(b.mean))


def convergence_key(key: str) -> str:
    """The metrics key `--repeats auto` watches for objective `key` (a cost: its throughput)."""
    return CONVERGES_ON.get(key, key)


def converged(values: Sequence[float], rel_half_width: float = 0.03, cap: int = 5) -> bool:
    """``--repeats auto``: enough repeats once the 95% half-width of the finite values is within
    `rel_half_width` of their mean (at least 2 of them), or once `cap` values were taken. A run
    with no finite figure (+inf latency: its requests failed; NaN: the key is missing) has no
    spread to converge on: it does not count towards convergence, only towards the cap."""
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


def changed_from_defaults(flags: Mapping[str, Any], env: Mapping[str, str], defaults: Mapping[str, Any] | None) -> int:
    """Flags and environment variables a config changes from the server's own defaults: the
    flags by `simplicity`, each environment variable unless `defaults` holds it (as
    ``env:NAME``) with the same value. `defaults` None: nothing is known, every given one counts."""
    env_defaults = {k[4:]: v for k, v in (defaults or {}).items() if k.startswith("env:")}
    return simplicity(flags, defaults) + simplicity(env, env_defaults if defaults is not None else None)


def _same(a: Any, b: Any) -> bool:
    return a == b or str(a).strip().lower() == str(b).strip().lower()


@dataclass(frozen=True)
class ConfirmedConfig:
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


def choose_named_best(
    candidates: Sequence[ConfirmedConfig], direction: Direction | str, noise: Noise = PRIOR
) -> Decision:
    """Name the best of the confirmed `candidates` on evidence.

    Rank by mean. Ties are judged with `noise` (the study's pooled noise, see `overlap`). If
    the best ties the baseline within noise (`overlap`), name the baseline: no
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
    ranked = sorted(candidates, key=lambda c: (sign * est[c.number].mean, c.flags_changed, c.number))
    best = ranked[0]
    tied = [c for c in ranked[1:] if overlap(est[best.number], est[c.number], noise)]

    def show(c: ConfirmedConfig) -> str:
        name = "the defaults" if c.baseline else f"trial {c.number}"
        return f"{name} ({est[c.number].format(noise)})"

    def others(chosen: ConfirmedConfig) -> list[int]:
        return [c.number for c in [best, *tied] if c is not chosen]

    if best.baseline:
        return Decision(best.number, "no change beat the defaults: the defaults measured best", others(best))
    base = next((c for c in tied if c.baseline), None)
    if base is not None:
        return Decision(
            base.number,
            f"no change beat the defaults by more than the noise: "
            f"the best, {show(best)}, is tied within noise with {show(base)}",
            others(base),
        )
    simpler = [c for c in tied if c.flags_changed < best.flags_changed]
    if simpler:
        chosen = min(simpler, key=lambda c: c.flags_changed)  # stable: better mean first
        return Decision(
            chosen.number,
            f"tied within noise: {show(best)}, "
            f"{_flags(best.flags_changed)}, and {show(chosen)}, "
            f"{_flags(chosen.flags_changed)}; named the one with fewer flags changed",
            others(chosen),
        )
    if tied:
        names = ", ".join(f"trial {c.number}" for c in tied)
        return Decision(
            best.number,
            f"best by mean; tied within noise with {names}, none of "
            f"which changes fewer flags from the server's defaults",
            others(best),
        )
    if len(ranked) == 1:
        return Decision(best.number, "the only confirmed config")
    return Decision(best.number, f"best by more than the noise: {show(best)} against {show(ranked[1])}")
