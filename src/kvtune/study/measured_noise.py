"""A study's measured noise: the spread of repeated measurements of one config, pooled over the
study's configs, and the pairs of measurements that disagree beyond it.

Every "+/-" kvtune prints comes from here, and from this study's own measurements, because a
machine's noise depends on the machine and its state (a busy 2-core VM measured one config at
14.94 and 48.1 tok/s). It is shown, never used to name a config: naming is the verdict's
(src/kvtune/verdict/), which tests on its own fresh runs.

A config's repeated measurements are its first measurement and its re-measurements
(`TrialOutcome.confirmation`, each valid entry of its "runs"), each one launch of a fresh server,
plus the spread of its ``--repeats`` runs on one server (`TrialOutcome.spread`, a coefficient of
variation, with ``metrics["repeats"]`` runs). Duplicates (a replay of an earlier trial), failed
measurements and measurements that stayed disturbed (the machine was busy with something else:
their spread is the other load's) are not repeats.

Why the log scale: configs differ in scale (20 vs 50 tok/s), and run-to-run noise on a shared
machine is multiplicative (a stolen core slows every request by a share), so the SD of
``ln(value)`` is one figure for every config, about the relative SD; a ``--repeats`` run set's
coefficient of variation is the same figure to first order. Before any config was measured twice
`PRIOR` stands in, labelled "prior, not measured" wherever it is shown (10% relative SD: the
project's recorded landscapes measure median test-retest spreads of 9.8% on llama-server and
15.3% on vLLM CPU). Quantiles are scipy's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from scipy import stats as _st

from kvtune.study.outcome import TrialOutcome

OBJECTIVE = "objective"  # the key under which the study's primary objective's noise is reported
PRIOR_REL_SD = 0.10
MIN_JUDGE_DOF = 3  # a pooled noise of fewer degrees of freedom does not call a pair inconsistent


def quantile(p: float, dof: int) -> float:
    """Student t's `p` quantile at `dof` degrees of freedom; the normal's for dof 0 (the prior)."""
    return float(_st.t.ppf(p, dof)) if dof >= 1 else float(_st.norm.ppf(p))


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
        """The two-sided 95% quantile this noise is used with (Student t at its dof, the normal's
        for the prior)."""
        return quantile(0.975, self.dof)

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
    q_0.995(dof) * s * sqrt(2)`` (a 99% two-sided test of the log-ratio, whose SD is s*sqrt(2)).
    Such a pair is listed, not averaged. A failed measurement (non-positive or non-finite) is not
    compared here: its failure says more."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (a, b)):
        return False
    return abs(math.log(a / b)) > quantile(0.995, noise.dof) * noise.rel_sd * math.sqrt(2)


def inconsistent_pairs(
    samples: Mapping[int, Sequence[float]], repeat_spreads: Mapping[int, tuple[float, int]] | None = None
) -> list[dict[str, Any]]:
    """Each config whose first and latest measurements are inconsistent, judged against the
    noise pooled from the *other* configs (leave one out: an outlier pair would otherwise widen
    the very noise it is judged by). A leave-one-out pool of fewer than `MIN_JUDGE_DOF` degrees of
    freedom is too unsure to judge by: the prior judges instead."""
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
    inconsistent pair (one side was disturbed) does not set the noise: one busy minute would
    otherwise widen every +/- of the study. Its own figure is shown as inconsistent."""
    bad = tuple(inconsistent_pairs(samples, repeat_spreads))
    flagged = {p["trial"] for p in bad}
    noise = pool(
        {k: v for k, v in samples.items() if k not in flagged},
        {k: v for k, v in (repeat_spreads or {}).items() if k not in flagged},
    )
    return Noise(noise.rel_sd, noise.dof, noise.configs, bad)


# ---- from the study record ----------------------------------------------------------------------
def measurements(o: TrialOutcome, key: str) -> list[float]:
    """The values of `key` (a metrics key, or `OBJECTIVE`) from every launch that measured `o`:
    the first measurement, then the re-measurements, in that order."""
    again = o.confirmation or {}
    runs = [r for r in again.get("runs") or [again] if r.get("valid", True) and not r.get("disturbed")] if again else []
    if key == OBJECTIVE:
        first, later = o.objective, [r.get("objective") for r in runs]
    else:
        first, later = (o.metrics or {}).get(key), [(r.get("metrics") or {}).get(key) for r in runs]
    values = [None if o.disturbed else first, *later]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _repeat_spread(o: TrialOutcome, key: str, objective_key: str | None) -> tuple[float, int] | None:
    if o.disturbed:
        return None
    runs = int((o.metrics or {}).get("repeats") or 0)
    metric = objective_key if key == OBJECTIVE else key
    cv = o.spread.get(metric) if metric else None
    return (float(cv), runs) if runs >= 2 and isinstance(cv, (int, float)) else None


def noise_of(outcomes: Sequence[TrialOutcome], key: str = OBJECTIVE, objective_key: str | None = None) -> Noise:
    """The study's pooled noise on `key`, over every config measured more than once.
    `objective_key` (the primary objective's metrics key) finds its ``--repeats`` spread."""
    own = [o for o in outcomes if o.duplicate_of is None and o.metrics]
    samples = {o.number: measurements(o, key) for o in own}
    spreads = {o.number: s for o in own if (s := _repeat_spread(o, key, objective_key)) is not None}
    return study_noise(samples, spreads)
