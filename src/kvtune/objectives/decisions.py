"""Sequential decisions between the leader and its nearest rival, on paired measurements.

Confirmation measures the leader and the rival in A B A B order on fresh servers, so slow drift
(a machine getting busier or quieter) moves both sides of a pair alike and cancels in their
difference. The decision is on the paired log-ratios ``d_i = ln(a_i / b_i)``: their mean and its
95% interval. With few pairs a t-interval from the pairs alone is useless (12.7 standard errors
wide from two values), so the study's pooled noise stands in (the SD of one log-ratio is
``s * sqrt(2)``) until the pairs have at least as many degrees of freedom of their own. The
interval excluding zero names a winner; otherwise another pair is measured, up to a cap, after
which the two are tied and the simpler config (fewer flags changed from the server's defaults)
wins. Pure: the caller measures, this module only decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from kvtune.kinds import Direction
from kvtune.objectives.noise import PRIOR, Noise, t95


class PairCall(str, Enum):
    LEADER = "leader wins"
    RIVAL = "rival wins"
    UNDECIDED = "undecided: measure another pair"
    TIE = "tie at the cap"


@dataclass(frozen=True)
class PairedInterval:
    """The mean paired log-ratio leader/rival with its 95% interval; `source` says whose spread."""

    mean: float
    low: float
    high: float
    pairs: int
    dof: int
    source: str

    def ratio_text(self) -> str:
        """``+12.3% [+4.1%, +21.2%]``: the leader relative to the rival, as people read it."""
        pct = [(math.exp(x) - 1) * 100 for x in (self.mean, self.low, self.high)]
        return f"{pct[0]:+.1f}% [{pct[1]:+.1f}%, {pct[2]:+.1f}%] ({self.source})"


def _log_ratios(pairs: Sequence[tuple[float, float]]) -> list[float]:
    out = []
    for a, b in pairs:
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (a, b)):
            raise ValueError(
                f"paired measurements must be positive and finite, got ({a}, {b}): "
                f"a failed measurement is a failure, not a figure to compare"
            )
        out.append(math.log(a / b))
    return out


def paired_interval(pairs: Sequence[tuple[float, float]], noise: Noise = PRIOR) -> PairedInterval:
    """95% interval of the mean of ``ln(a_i / b_i)`` over the (leader, rival) `pairs`: Student t
    from the pairs' own spread once they have at least as many degrees of freedom as the pooled
    noise (and at least 2), else the pooled noise's ``s * sqrt(2 / n)`` at its dof."""
    d = _log_ratios(pairs)
    if not d:
        raise ValueError("a paired interval needs at least one pair")
    n = len(d)
    mean = sum(d) / n
    if n - 1 >= max(noise.dof, 2):
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        half, dof, source = t95(n - 1) * sd / math.sqrt(n), n - 1, f"{n} pairs' own spread"
    else:
        half = noise.t() * noise.rel_sd * math.sqrt(2 / n)
        dof, source = noise.dof, noise.source()
    return PairedInterval(mean, mean - half, mean + half, n, dof, source)


def decide(
    pairs: Sequence[tuple[float, float]], direction: Direction | str, cap: int, noise: Noise = PRIOR
) -> tuple[PairCall, PairedInterval]:
    """The verdict on (leader, rival) pairs of the objective: the side the interval favours when
    it excludes zero; a tie once `cap` pairs were measured without that; else undecided."""
    if cap < 1:
        raise ValueError(f"the pair cap must be at least 1, got {cap}")
    iv = paired_interval(pairs, noise)
    better = 1.0 if Direction(direction) is Direction.MAXIMIZE else -1.0
    low, high = sorted((better * iv.low, better * iv.high))
    if low > 0:
        return PairCall.LEADER, iv
    if high < 0:
        return PairCall.RIVAL, iv
    return (PairCall.TIE if len(pairs) >= cap else PairCall.UNDECIDED), iv


def tie_break(leader_changed: int, rival_changed: int) -> PairCall:
    """A tie goes to the simpler config: fewer flags (and environment variables) changed from the
    server's defaults; equally simple, the leader (the better mean) stays."""
    return PairCall.RIVAL if rival_changed < leader_changed else PairCall.LEADER
