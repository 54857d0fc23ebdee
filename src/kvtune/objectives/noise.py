"""Noise measured, not assumed: one pooled spread per study and metric, and inconsistent pairs.

Every "+/-" kvtune prints must come from this study's own repeated measurements, because a
machine's noise depends on the machine and its state (a busy 2-core VM measured one config at
14.94 and 48.1 tok/s). `pool` takes, per config, the values of its repeated measurements (the
first measurement, its confirmation re-measurements) and the spread of its ``--repeats`` runs,
and pools them into one standard deviation with its degrees of freedom.

Why the log scale: configs differ in scale (20 vs 50 tok/s), and run-to-run noise on a shared
machine is multiplicative (a stolen core slows every request by a share, not by a fixed number
of tokens/s), so the spread of ``ln(value)`` is one figure that fits every config; its SD is the
relative SD for small spreads, and a log-ratio is symmetric (a 2x slowdown and a 2x speed-up are
the same distance), which relative deviations from a two-value mean are not. A ``--repeats``
run set gives its coefficient of variation, which is the SD of the log values to first order.

Before any config was measured twice there is nothing to pool: `PRIOR` then stands in, labelled
"prior, not measured" wherever it is shown (10% relative SD: the project's recorded landscapes
measure median test-retest spreads of 9.8% on llama-server and 15.3% on vLLM CPU). Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

# Two-sided 95% Student t quantiles, df = 1..30 (index df - 1); above 30 the normal 1.96, which
# understates the half-width by under 4% (t at df 31 is 2.040).
T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
Z95 = 1.96
# Two-sided 99% (one-sided 0.995) Student t quantiles, df = 1..30 (index df - 1); 2.576 above.
T995 = (
    63.657,
    9.925,
    5.841,
    4.604,
    4.032,
    3.707,
    3.499,
    3.355,
    3.250,
    3.169,
    3.106,
    3.055,
    3.012,
    2.977,
    2.947,
    2.921,
    2.898,
    2.878,
    2.861,
    2.845,
    2.831,
    2.819,
    2.807,
    2.797,
    2.787,
    2.779,
    2.771,
    2.763,
    2.756,
    2.750,
)
Z995 = 2.576
PRIOR_REL_SD = 0.10


def t95(df: int) -> float:
    """Two-sided 95% t quantile for `df` degrees of freedom (1.96 above 30)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    return T95[df - 1] if df <= len(T95) else Z95


def t995(df: int) -> float:
    """Two-sided 99% t quantile for `df` degrees of freedom (2.576 above 30)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    return T995[df - 1] if df <= len(T995) else Z995


@dataclass(frozen=True)
class Noise:
    """A study's noise on one metric: the SD of ln(value) between repeated measurements of one
    config, with its degrees of freedom (0: the prior, nothing measured yet), the configs it was
    pooled from and the pairs found inconsistent (see `inconsistent_pairs`)."""

    rel_sd: float
    dof: int
    configs: tuple[int, ...] = ()
    inconsistent: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @property
    def measured(self) -> bool:
        return self.dof > 0

    def t(self) -> float:
        """The 95% quantile this noise is used with: Student t at its dof, the normal's for the prior."""
        return t95(self.dof) if self.measured else Z95

    def half_width(self, mean: float, n: int) -> float:
        """95% half-width of a mean of `n` measurements of one config, in the metric's units."""
        return self.t() * self.rel_sd * abs(mean) / math.sqrt(max(n, 1))

    def source(self) -> str:
        """Where the +/- comes from, as every figure says it."""
        if self.measured:
            return f"pooled noise {self.rel_sd:.1%}, {self.dof} dof"
        return f"prior {self.rel_sd:.0%}, not measured: no repeats yet"

    def is_inconsistent(self, number: int) -> bool:
        return any(p["trial"] == number for p in self.inconsistent)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rel_sd": self.rel_sd,
            "dof": self.dof,
            "measured": self.measured,
            "source": self.source(),
            "configs": list(self.configs),
            "inconsistent": list(self.inconsistent),
        }


PRIOR = Noise(PRIOR_REL_SD, 0)
MIN_JUDGE_DOF = 3  # a pooled noise of fewer degrees of freedom does not call a pair inconsistent


def from_dict(d: Mapping[str, Any] | None) -> Noise:
    """A `Noise.to_dict()` read back (results.json's "noise" entries); the prior when absent."""
    if not d or not isinstance(d.get("rel_sd"), (int, float)) or not d.get("dof"):
        return PRIOR
    return Noise(float(d["rel_sd"]), int(d["dof"]), tuple(d.get("configs") or ()), tuple(d.get("inconsistent") or ()))


def _logs(values: Sequence[float]) -> list[float]:
    """ln of the values that have one: a failed run (+inf latency, 0 tok/s) has no spread."""
    return [math.log(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]


def pool(
    samples: Mapping[int, Sequence[float]], repeat_spreads: Mapping[int, tuple[float, int]] | None = None
) -> Noise:
    """The pooled noise: ``sum of squared log deviations / sum of (n_i - 1)`` over every config
    `i` with two or more usable values in `samples` (config -> values of its measurements), plus
    ``(n - 1) * cv^2`` for each config's ``--repeats`` runs in `repeat_spreads` (config -> (CV,
    runs)). The prior when nothing was measured twice. Inconsistent pairs are not looked for here:
    see `inconsistent_pairs`."""
    ss, dof, used = 0.0, 0, set()
    for number, values in samples.items():
        logs = _logs(values)
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
        used.add(number)
    for number, (cv, runs) in (repeat_spreads or {}).items():
        if runs >= 2 and isinstance(cv, (int, float)) and math.isfinite(cv) and cv >= 0:
            ss += (runs - 1) * cv**2
            dof += runs - 1
            used.add(number)
    if dof == 0:
        return PRIOR
    return Noise(math.sqrt(ss / dof), dof, tuple(sorted(used)))


def inconsistent(a: float, b: float, noise: Noise) -> bool:
    """Two measurements of one config disagree beyond what `noise` allows: ``|ln(a/b)| >
    t_0.995(dof) * s * sqrt(2)`` (a 99% two-sided test of the log-ratio, whose SD is s*sqrt(2);
    the normal quantile under the prior). Such a pair is re-measured, not averaged. A failed
    measurement (non-positive or non-finite) is not compared here: its failure says more."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (a, b)):
        return False
    q = t995(noise.dof) if noise.measured else Z995
    return abs(math.log(a / b)) > q * noise.rel_sd * math.sqrt(2)


def within_noise(a: float, b: float, noise: Noise) -> bool:
    """Two configs' single measurements `a` and `b` could be one config measured twice: ``|ln(a/b)|
    <= t_0.975(dof) * s * sqrt(2)`` (the 95% band of a log-ratio of two runs). Used before any pair
    is measured, to decide whether a gap on first measurements is worth a duel. A pool of fewer
    than `MIN_JUDGE_DOF` degrees of freedom is too unsure to narrow the band: the prior's band is
    used when it is the wider. (A demo run's baseline measured 21.43 then 21.44 tok/s: that one
    pair's "noise" of 0.03% made a 6% gap to the leader look real, so the defaults were never
    dueled, and two tuned configs that tied with them were named instead.)"""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (a, b)):
        return False
    band = noise.t() * noise.rel_sd * math.sqrt(2)
    if noise.measured and noise.dof < MIN_JUDGE_DOF:
        band = max(band, PRIOR.t() * PRIOR.rel_sd * math.sqrt(2))
    return abs(math.log(a / b)) <= band


def inconsistent_pairs(
    samples: Mapping[int, Sequence[float]], repeat_spreads: Mapping[int, tuple[float, int]] | None = None
) -> list[dict[str, Any]]:
    """Each config whose first and latest measurements are inconsistent, judged against the
    noise pooled from the *other* configs (leave one out: an outlier pair would otherwise widen
    the very noise it is judged by, and a study with one repeated config could never flag it).
    A leave-one-out pool of fewer than `MIN_JUDGE_DOF` degrees of freedom is too unsure to judge
    by: the prior judges instead. (A demo run had one other config whose two runs happened to
    agree within 0.1%: against that "noise" the baseline's 8.8% gap was called inconsistent and
    dropped from the pool, which then printed +/- 0.16 tok/s on a 2 tok/s disagreement.)"""
    found = []
    for number, values in samples.items():
        usable = [v for v in values if _logs([v])]
        if len(usable) < 2:
            continue
        others = {k: v for k, v in samples.items() if k != number}
        rest = {k: v for k, v in (repeat_spreads or {}).items() if k != number}
        noise = pool(others, rest)
        if noise.measured and noise.dof < MIN_JUDGE_DOF:
            noise = PRIOR
        a, b = usable[0], usable[-1]
        if inconsistent(a, b, noise):
            found.append(
                {"trial": number, "values": [a, b], "log_ratio": round(math.log(b / a), 4), "against": noise.source()}
            )
    return found


def study_noise(
    samples: Mapping[int, Sequence[float]], repeat_spreads: Mapping[int, tuple[float, int]] | None = None
) -> Noise:
    """`pool` over the consistent configs, with the inconsistent pairs recorded beside it. An
    inconsistent pair is not evidence (one side was disturbed: re-measure it, do not average it),
    so it does not set the noise either: one busy minute would otherwise widen every +/- of the
    study until nothing could be told apart. Its own figure is shown as inconsistent."""
    bad = tuple(inconsistent_pairs(samples, repeat_spreads))
    flagged = {p["trial"] for p in bad}
    noise = pool(
        {k: v for k, v in samples.items() if k not in flagged},
        {k: v for k, v in (repeat_spreads or {}).items() if k not in flagged},
    )
    return Noise(noise.rel_sd, noise.dof, noise.configs, bad)
