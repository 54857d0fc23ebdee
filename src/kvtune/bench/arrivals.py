"""Open-loop arrival schedules: when each request is due, precomputed from a seed.

An open-loop benchmark must send on a schedule fixed before the run starts, never on the
server's pace, or a slow server quietly receives less load (coordinated omission). The schedule
is a list of offsets in seconds from the start of the measured phase; the first request is due at
0 and each later one after an inter-arrival gap drawn from:

- ``poisson``: exponential gaps with mean 1/rate (CV 1);
- ``gamma``: gamma gaps with shape `burstiness` and mean 1/rate, as vLLM's ``--burstiness``
  (CV = 1/sqrt(burstiness): below 1 burstier than Poisson, above 1 more regular);
- ``constant``: gaps of exactly 1/rate.

Pure and deterministic given the seed (stdlib `random`, no numpy).
"""

from __future__ import annotations

import math
import random

from kvtune.errors import SpecError
from kvtune.workload import ARRIVALS


def _gap_sampler(rate: float, arrival: str, burstiness: float, seed: int):
    if not (rate > 0 and math.isfinite(rate)):
        raise SpecError(f"arrival rate must be a positive number of requests/s, got {rate}")
    if arrival not in ARRIVALS:
        raise SpecError(f"arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    if not (burstiness > 0 and math.isfinite(burstiness)):
        raise SpecError(f"burstiness must be a positive number, got {burstiness}")
    rng = random.Random(f"kvtune-arrivals:{seed}")
    mean = 1.0 / rate
    if arrival == "constant":
        return lambda: mean
    if arrival == "poisson" or burstiness == 1.0:
        return lambda: rng.expovariate(rate)
    return lambda: rng.gammavariate(burstiness, mean / burstiness)  # (shape, scale)


def arrival_offsets(
    n: int, rate: float, arrival: str = "poisson", burstiness: float = 1.0, seed: int = 0
) -> list[float]:
    """Due times (seconds from the phase start) of `n` requests; the first is due at 0."""
    gap = _gap_sampler(rate, arrival, burstiness, seed)
    out: list[float] = []
    t = 0.0
    for _ in range(max(0, n)):
        out.append(t)
        t += gap()
    return out


def arrival_offsets_for(
    duration_s: float,
    rate: float,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    seed: int = 0,
    max_requests: int = 10_000_000,
) -> list[float]:
    """Due times of every request that falls in ``[0, duration_s)``, the same stream of gaps as
    `arrival_offsets` with the same seed (so a longer run extends a shorter one)."""
    gap = _gap_sampler(rate, arrival, burstiness, seed)
    out: list[float] = []
    t = 0.0
    while t < duration_s and len(out) < max_requests:
        out.append(t)
        t += gap()
    return out
