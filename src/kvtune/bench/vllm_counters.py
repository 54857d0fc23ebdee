"""vLLM's own counters and gauges, read from its Prometheus ``/metrics`` (server_metrics.py
scrapes them; this module knows what vLLM's names mean).

Every figure kvtune takes from vLLM's counters is named here once: the headline figures under
stable names (preemptions, KV-cache usage, waiting and running requests), the share of drafted
tokens the target model accepted (speculative decoding, for one run and pooled over repeats),
and the prefix cache's looked-up and found prompt tokens. Names as of vLLM 0.32; an older
vLLM's ``gpu_cache_usage_perc`` is read where ``kv_cache_usage_perc`` is missing. Pure.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

PREEMPTIONS = "vllm:num_preemptions_total"
KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # newer first
WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
DRAFTED = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"


def headline(deltas: Mapping[str, float], gauges: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """vLLM's headline figures over a measured phase under stable names (empty for a server
    that is not vLLM): counter deltas and gauge max/mean as `server_metrics.metrics_delta` made
    them."""
    out: dict[str, float] = {}
    if PREEMPTIONS in deltas:
        out["num_preemptions_delta"] = deltas[PREEMPTIONS]
    for name in KV_CACHE_USAGE:
        if name in gauges:
            out["max_kv_cache_usage_perc"] = gauges[name]["max"]
            break
    if WAITING in gauges:
        out["max_num_requests_waiting"] = gauges[WAITING]["max"]
        out["mean_num_requests_waiting"] = gauges[WAITING]["mean"]
    if RUNNING in gauges:
        out["max_num_requests_running"] = gauges[RUNNING]["max"]
    drafted = deltas.get(DRAFTED)
    if drafted:  # speculative decoding: the share of drafted tokens the target model accepted
        out["spec_acceptance_rate"] = deltas.get(ACCEPTED, 0.0) / drafted
    return out


def acceptance_from(server_metrics: dict[str, Any] | None) -> dict[str, float]:
    """``spec_acceptance_rate`` from a run's /metrics deltas (vLLM's spec-decode counters), for
    the run's metrics; empty when the server drafted nothing or was not scraped."""
    rate = (server_metrics or {}).get("spec_acceptance_rate")
    return {} if rate is None else {"spec_acceptance_rate": float(rate)}


def pooled_acceptance(server_metrics: Iterable[dict[str, Any] | None]) -> dict[str, float]:
    """The share of drafted tokens accepted over several runs' /metrics deltas (weighted by what
    each drafted, not a mean of the runs' rates); empty when none drafted."""
    counts = [((m or {}).get("deltas") or {}) for m in server_metrics]
    drafted = sum(d.get(DRAFTED, 0.0) for d in counts)
    accepted = sum(d.get(ACCEPTED, 0.0) for d in counts)
    return {"spec_acceptance_rate": accepted / drafted} if drafted else {}


def prefix_counts(server_metrics: Iterable[dict[str, Any] | None]) -> tuple[float, float] | None:
    """(prompt tokens found in the prefix cache, prompt tokens looked up) over the runs' deltas;
    None when no run's server counted any (not vLLM, or not scraped)."""
    queries = hits = 0.0
    seen = False
    for m in server_metrics:
        deltas = (m or {}).get("deltas") or {}
        if PREFIX_QUERIES in deltas:
            seen = True
            queries += float(deltas[PREFIX_QUERIES])
            hits += float(deltas.get(PREFIX_HITS, 0.0))
    return (hits, queries) if seen else None
