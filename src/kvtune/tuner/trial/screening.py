"""Screen short, measure long only what can still win.

A search trial's measurement is watched, like the early stop's (stopping.py), by one more rule:
once a share of its planned requests (`screen_fraction`, half by default) has ended, the
objective is computed from those requests alone, and the measurement goes on only while that
short-run figure, with the study's measured noise, can still reach the leader (the best
feasible config measured in full so far). A config that cannot is cut there: it is told to the
sampler with its short-run figures (so the search learns where not to look) and marked
``screened`` in its metrics. Short runs only select: the verdict's fresh runs, whole and
unchanged, prove whatever is named, and a screened config is never a leader.

Why this margin: the short run has fewer requests, so its figure is noisier than a full one;
with the study's relative SD ``s`` of a full measurement (log scale, study/measured_noise.py;
its 10% prior before any repeat) a run of ``k`` of ``n`` requests is taken to have SD
``s * sqrt(n / k)``, and a config is cut only when the log-gap to the leader exceeds
``SCREEN_Z`` (2.5: about 1 in 160 one-sided) SDs of the difference. At 10% noise and half the
requests that is a config 1 - exp(-2.5 x 0.173) = 35% behind the leader: the rule drops only
what is clearly losing, so a near-tie is always measured in full. The replay
(benchmarks/search_efficiency.py) calls this same code on recorded requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from kvtune.kinds import Direction
from kvtune.objectives.metrics import RequestSample, summarize_requests
from kvtune.study.outcome import TrialOutcome

SCREEN_Z = 2.5
SCREENED = "screened"  # the metrics key a screened measurement carries (1.0)


@dataclass(frozen=True)
class Leader:
    """What a new config must be able to reach: the leader's objective (`key` in its metrics,
    from a full measurement), which way is better, and the study's relative SD of one full
    measurement of that objective."""

    value: float
    key: str
    direction: Direction
    rel_sd: float

    @property
    def maximize(self) -> bool:
        return self.direction is Direction.MAXIMIZE


def can_still_win(short: float, observed: int, planned: int, leader: Leader, z: float = SCREEN_Z) -> bool:
    """Whether a short-run figure of `observed` of `planned` requests can still reach `leader`
    within `z` SDs of the difference (see the module docstring). A figure that is not a
    positive number says nothing, so the run goes on."""
    if not (math.isfinite(short) and short > 0 and leader.value > 0 and 0 < observed <= planned):
        return True
    short_sd = leader.rel_sd * math.sqrt(planned / observed)
    spread = z * math.sqrt(leader.rel_sd**2 + short_sd**2)
    behind = math.log(leader.value / short) if leader.maximize else math.log(short / leader.value)
    return behind <= spread


def short_figure(samples: Sequence[RequestSample], key: str) -> float | None:
    """The objective `key` over `samples` alone, as the load client summarizes a run (its
    measured phase from the first request sent to the last one ended); None when the summary
    has no such figure (energy, cost: not computable from requests alone)."""
    if not samples:
        return None
    started = min(s.send_time for s in samples)
    ended = max(_ended(s) for s in samples)
    value = summarize_requests(list(samples), ended - started).get(key)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _ended(s: RequestSample) -> float:
    if s.end_time is not None:
        return s.end_time
    return s.send_time + (s.e2el_s or 0.0)


class ScreenWatch:
    """`stop_when` for the load client: after the `at`-th of `planned` measured requests, cuts
    the run when its short-run figure cannot reach `leader`. `fired` holds the reason once it
    cut (and tells a screen stop from the early stop's)."""

    def __init__(self, leader: Leader, planned: int, fraction: float) -> None:
        self.leader, self.planned = leader, planned
        self.at = max(1, math.ceil(fraction * planned))
        self.samples: list[RequestSample] = []
        self.fired: str | None = None

    @classmethod
    def over(cls, leader: Leader | None, planned: int | None, fraction: float) -> "ScreenWatch | None":
        """A watch over `planned` requests, or None when nothing could be screened (no leader,
        no planned count, screening off, or a screen point at the last request)."""
        if leader is None or not planned or not 0 < fraction < 1 or math.ceil(fraction * planned) >= planned:
            return None
        return cls(leader, planned, fraction)

    def __call__(self, sample: RequestSample) -> str | None:
        self.samples.append(sample)
        if len(self.samples) != self.at:
            return None
        short = short_figure(self.samples, self.leader.key)
        if short is None or can_still_win(short, self.at, self.planned, self.leader):
            return None
        self.fired = (
            f"screened out: {self.leader.key} {short:.4g} after {self.at} of {self.planned} requests "
            f"cannot reach the leader's {self.leader.value:.4g} within the noise ({self.leader.rel_sd:.0%} per run)"
        )
        return self.fired


def leader_of(outcomes: Sequence[TrialOutcome], key: str, direction: Direction, rel_sd: float) -> Leader | None:
    """The leader a new config is screened against: the best feasible config measured in full
    (the baseline included; never a screened or duplicate trial), None while there is none."""
    whole = [
        o
        for o in outcomes
        if o.feasible
        and o.metrics
        and o.duplicate_of is None
        and not o.metrics.get(SCREENED)
        and isinstance(o.metrics.get(key), (int, float))
        and math.isfinite(o.metrics[key])
        and o.metrics[key] > 0
    ]
    if not whole:
        return None
    pick = max if direction is Direction.MAXIMIZE else min
    best = pick(whole, key=lambda o: float(o.metrics[key]))  # type: ignore[index]
    return Leader(float(best.metrics[key]), key, direction, rel_sd)  # type: ignore[index]
