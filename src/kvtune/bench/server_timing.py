"""The server's own view of a run's requests, beside the client's.

llama-server sends per-request ``timings`` (prompt and decode time, cached prompt tokens, and
when it speculated the tokens drafted and accepted):
client TTFT minus the server's prompt time is the time a request waited for a free slot. The
most requests in flight at once tells whether the load reached the concurrency asked for.
"""

from __future__ import annotations

from kvtune.objectives.metrics import RequestSample, percentile


def server_timing_summary(samples: list[RequestSample]) -> dict[str, float]:
    """llama-server's per-request ``timings`` beside the client's TTFT (successful requests).

    ``prompt_ms`` excludes the wait for a free slot, so client TTFT - server prompt time is the
    queueing (plus HTTP and tokenization). Empty when the server sent no timings.
    """
    rows = [
        (1000.0 * s.ttft_s, s.server_timings)
        for s in samples
        if s.ok
        and s.ttft_s is not None
        and isinstance(s.server_timings, dict)
        and isinstance(s.server_timings.get("prompt_ms"), (int, float))
    ]
    if not rows:
        return {}
    prompt = [float(t["prompt_ms"]) for _, t in rows]
    queue = [ttft - float(t["prompt_ms"]) for ttft, t in rows]
    out = {
        "server_timings_requests": float(len(rows)),
        "mean_prompt_ms_server": sum(prompt) / len(prompt),
        "median_prompt_ms_server": percentile(prompt, 50),
        "p99_prompt_ms_server": percentile(prompt, 99),
        "mean_queue_ms_server": sum(queue) / len(queue),
        "median_queue_ms_server": percentile(queue, 50),
        "p99_queue_ms_server": percentile(queue, 99),
    }
    decode = [
        float(t["predicted_ms"]) / (t["predicted_n"] - 1)
        for _, t in rows
        if isinstance(t.get("predicted_n"), (int, float))
        and t["predicted_n"] > 1
        and isinstance(t.get("predicted_ms"), (int, float))
    ]
    if decode:
        out["mean_tpot_ms_server"] = sum(decode) / len(decode)
    cached = [float(t["cache_n"]) for _, t in rows if isinstance(t.get("cache_n"), (int, float))]
    if cached:
        out["mean_cached_prompt_tokens_server"] = sum(cached) / len(cached)
    out.update(draft_acceptance([t for _, t in rows]))
    return out


def draft_acceptance(timings: list[dict]) -> dict[str, float]:
    """``spec_acceptance_rate``: accepted / drafted tokens over the requests whose ``timings``
    count drafts (llama-server's ``draft_n`` / ``draft_n_accepted`` when it speculated); empty
    when none drafted, so a server that does not speculate reports no rate (not 0)."""
    counted = [
        (float(t["draft_n"]), float(t["draft_n_accepted"]))
        for t in timings
        if isinstance(t.get("draft_n"), (int, float)) and isinstance(t.get("draft_n_accepted"), (int, float))
    ]
    drafted = sum(d for d, _ in counted)
    if not drafted:
        return {}
    return {"spec_acceptance_rate": sum(a for _, a in counted) / drafted, "spec_draft_tokens_server": drafted}


def max_concurrency(samples: list[RequestSample]) -> int:
    """The most requests in flight at once (send..end intervals)."""
    events = sorted(
        [(s.send_time, 1) for s in samples if s.end_time is not None]
        + [(s.end_time, -1) for s in samples if s.end_time is not None],
        key=lambda e: (e[0], e[1]),
    )
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best
