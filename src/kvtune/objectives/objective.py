"""What a study optimizes: a typed (name, metric key, direction) for every objective name.

Names are what users write (``output_throughput``, ``capacity``, ``ttft_p95``); the key is the
metrics-dict entry the tuner reads; the direction says whether more is better. Pure.
"""

from __future__ import annotations

from typing import NamedTuple

from kvtune.kinds import Direction
from kvtune.objectives.cost import COST_PER_MTOK
from kvtune.objectives.metrics import LATENCY_METRICS
from kvtune.objectives.targets import STATS


class Objective(NamedTuple):
    name: str
    key: str
    direction: Direction

    @property
    def maximize(self) -> bool:
        return self.direction is Direction.MAXIMIZE


def _catalogue() -> dict[str, Objective]:
    maximized = ("output_throughput", "capacity", "request_throughput", "slo_attainment")
    out = {n: Objective(n, n, Direction.MAXIMIZE) for n in maximized}
    # USD per 1M output tokens at the study's price (objectives/cost.py): less is better.
    out[COST_PER_MTOK] = Objective(COST_PER_MTOK, COST_PER_MTOK, Direction.MINIMIZE)
    for metric in LATENCY_METRICS:
        for stat in STATS:
            name = f"{metric}_{stat}"
            out[name] = Objective(name, f"{'median' if stat == 'p50' else stat}_{metric}_ms", Direction.MINIMIZE)
    return out


OBJECTIVES: dict[str, Objective] = _catalogue()


def objective(name: str) -> Objective:
    """The Objective of a name users write; KeyError for an unknown one (callers validate)."""
    return OBJECTIVES[name]
