"""The prefix-cache hit rate from the servers' own figures (vLLM's counters, llama-server's timings)."""

from __future__ import annotations

import math

from kvtune.bench.prefix_reuse import hit_rate_note, prefix_cache_hit_rate
from kvtune.bench.vllm_counters import PREFIX_HITS, PREFIX_QUERIES
from kvtune.objectives.metrics import RequestSample


def _answered(timings: dict | None, ok: bool = True) -> RequestSample:
    return RequestSample(send_time=0.0, ok=ok, server_timings=timings)


def test_vllm_counters_over_the_runs() -> None:
    runs = [
        {"deltas": {PREFIX_QUERIES: 1000.0, PREFIX_HITS: 250.0}},
        {"deltas": {PREFIX_QUERIES: 1000.0, PREFIX_HITS: 750.0}},
    ]
    assert prefix_cache_hit_rate([], runs) == 0.5
    # the server's counters win over per-response timings when both are there
    assert prefix_cache_hit_rate([_answered({"cache_n": 10, "prompt_n": 0})], runs) == 0.5


def test_llama_server_timings_of_the_answered_requests() -> None:
    samples = [
        _answered({"cache_n": 300, "prompt_n": 100}),
        _answered({"cache_n": 0, "prompt_n": 400}),
        _answered({"cache_n": 500, "prompt_n": 0}, ok=False),  # a failed request is not counted
    ]
    assert prefix_cache_hit_rate(samples, [None, {"available": False}]) == 300 / 800


def test_nan_when_the_server_says_nothing_or_looked_nothing_up() -> None:
    assert math.isnan(prefix_cache_hit_rate([_answered(None), _answered({"prompt_n": 5})], [None]))
    assert math.isnan(prefix_cache_hit_rate([], [{"deltas": {PREFIX_QUERIES: 0.0}}]))
    assert hit_rate_note(math.nan) == "prefix-cache hit rate: not reported by the server"
    assert hit_rate_note(0.25) == "prefix-cache hit rate 25% (the server's own count)"
