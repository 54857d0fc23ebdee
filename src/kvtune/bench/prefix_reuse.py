"""The prefix-cache hit rate of a run, from the server's own figures, never guessed by the client.

- vLLM counts prompt tokens looked up in its prefix cache and those found, as Prometheus
  counters (``vllm:prefix_cache_queries_total``, ``vllm:prefix_cache_hits_total`` in vLLM
  0.32): their deltas over the measured phase (vllm_counters.py) give hits / queries.
- llama-server says per response, in the final chunk's ``timings``, how many prompt tokens
  came from the slot's cache (``cache_n``) and how many it processed (``prompt_n``): the rate
  is sum(cache_n) / sum(cache_n + prompt_n) over the answered requests.

NaN (written as null) when the server says neither: a rate of 0 would claim a cold cache.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from kvtune.bench.vllm_counters import prefix_counts
from kvtune.objectives.metrics import RequestSample


def _llama_counts(samples: Iterable[RequestSample]) -> tuple[float, float] | None:
    cached = processed = 0.0
    seen = False
    for s in samples:
        t = s.server_timings
        if not (s.ok and isinstance(t, dict)):
            continue
        c, p = t.get("cache_n"), t.get("prompt_n")
        if isinstance(c, (int, float)) and isinstance(p, (int, float)) and not isinstance(c, bool):
            seen = True
            cached += c
            processed += p
    return (cached, cached + processed) if seen else None


def prefix_cache_hit_rate(samples: list[RequestSample], server_metrics: Iterable[dict[str, Any] | None]) -> float:
    """Hits / looked-up prompt tokens over the runs (vLLM's counters first, else llama-server's
    timings); NaN when the server reported neither or looked nothing up."""
    counts = prefix_counts(server_metrics) or _llama_counts(samples)
    if counts is None or counts[1] <= 0:
        return math.nan
    return counts[0] / counts[1]


def hit_rate_note(rate: float) -> str:
    """The run's hit rate for people, or why there is none."""
    if math.isnan(rate):
        return "prefix-cache hit rate: not reported by the server"
    return f"prefix-cache hit rate {rate:.0%} (the server's own count)"
