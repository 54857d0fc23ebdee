"""A benchmark run as console rows and as vLLM-style JSON (pure: no I/O, no printing).

`metrics_table` gives (label, value) rows in the order of ``vllm bench serve``'s printout, with
kvtune's additions (queueing, schedule lag, a multi-turn run's conversations and per-turn TTFT,
server-side split). `to_vllm_json` writes vLLM's key names (``completed``,
``request_throughput``, ``mean_ttft_ms``, ``p99_tpot_ms``, ``input_lens``, ``ttfts``, ...) so
results load in tools built for vLLM's JSON, plus kvtune's per-request samples and run facts.
Two deliberate differences from vLLM: percentiles count a failed request as +inf
(MEASUREMENT.md), written as null when they are not finite (strict JSON has no Infinity); and
``std_*`` and means are over successful requests, as vLLM's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvtune.jsonsafe import to_jsonable
from kvtune.objectives.metrics import LATENCY_METRICS, PERCENTILES, RequestSample

if TYPE_CHECKING:
    from kvtune.bench.client import BenchRun

_LABELS = {
    "ttft": ("Time to First Token", "TTFT"),
    "tpot": ("Time per Output Token (excl. 1st token)", "TPOT"),
    "itl": ("Inter-token Latency", "ITL"),
    "e2el": ("End-to-end Latency", "E2EL"),
}


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "inf (failed requests)"
        if float(v).is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.{digits}f}"
    return str(v)


def metrics_table(metrics: dict) -> list[tuple[str, str]]:
    """Rows for the console. Section headers are rows whose value is "" (print them as rules)."""
    m = metrics
    rows: list[tuple[str, str]] = []

    def add(label: str, key: str, digits: int = 2) -> None:
        if key in m:
            rows.append((label, _fmt(m[key], digits)))

    add("Successful requests", "completed")
    add("Failed requests", "failed")
    if "error_rate" in m:
        rows.append(("Error rate (%)", _fmt(100.0 * m["error_rate"])))
    add("Benchmark duration (s)", "duration_s")
    add("Total input tokens", "total_input_tokens")
    add("Total generated tokens", "total_output_tokens")
    add("Request throughput (req/s)", "request_throughput")
    add("Request goodput (req/s)", "request_goodput")
    if "slo_attainment" in m:  # --slo: the share of requests that met every per-request SLO
        rows.append(("SLO attainment (%)", _fmt(100.0 * m["slo_attainment"])))
    add("Output token throughput (tok/s)", "output_throughput")
    add("Total token throughput (tok/s)", "total_token_throughput")
    add("Peak concurrent requests", "max_concurrent_requests")
    for metric in LATENCY_METRICS:
        if f"mean_{metric}_ms" not in m:
            continue
        header, short = _LABELS[metric]
        rows.append((header, ""))
        add(f"Mean {short} (ms)", f"mean_{metric}_ms")
        add(f"Median {short} (ms)", f"median_{metric}_ms")
        for p in PERCENTILES:
            if p != 50:
                add(f"P{p} {short} (ms)", f"p{p}_{metric}_ms")
    if "offered_rate" in m or "mean_schedule_lag_ms" in m:
        rows.append(("Open-loop schedule", ""))
        add("Offered rate (req/s)", "offered_rate")
        add("Mean send lag (ms)", "mean_schedule_lag_ms")
        add("P99 send lag (ms)", "p99_schedule_lag_ms")
        add("Max send lag (ms)", "max_schedule_lag_ms")
        if "fell_behind" in m:
            rows.append(("Client fell behind", "YES: results understate the load asked" if m["fell_behind"] else "no"))
    else:
        if "mean_queue_wait_ms" in m:
            rows.append(("Client", ""))
            add("Mean wait for a client slot (ms)", "mean_queue_wait_ms")
    rows += _conversation_rows(m)
    if "mean_prompt_ms_server" in m:
        rows.append(("Server timings (llama-server)", ""))
        add("Mean server prompt processing (ms)", "mean_prompt_ms_server")
        add("Mean queueing = TTFT - prompt (ms)", "mean_queue_ms_server")
        add("P99 queueing (ms)", "p99_queue_ms_server")
        add("Mean server decode per token (ms)", "mean_tpot_ms_server")
        add("Mean cached prompt tokens", "mean_cached_prompt_tokens_server")
    return rows


def _conversation_rows(m: dict) -> list[tuple[str, str]]:
    """A multi-turn run's rows (bench/multiturn.py): its conversations, and TTFT of first turns
    (a cold prefill) apart from later ones (the history, which a prefix cache can serve)."""
    if "conversations" not in m:
        return []
    rows = [("Multi-turn conversations", ""), ("Conversations", _fmt(m["conversations"]))]
    for label, key in (
        ("Mean turns per conversation", "mean_turns_per_conversation"),
        ("Ended early: context full", "conversations_cut_by_context"),
        ("Median TTFT turn 1 (ms)", "median_ttft_ms_turn1"),
        ("P90 TTFT turn 1 (ms)", "p90_ttft_ms_turn1"),
        ("Median TTFT later turns (ms)", "median_ttft_ms_later"),
        ("P90 TTFT later turns (ms)", "p90_ttft_ms_later"),
    ):
        if key in m:
            rows.append((label, _fmt(m[key])))
    return rows


def server_metrics_table(server_metrics: dict | None) -> list[tuple[str, str]]:
    """Rows for the /metrics highlights (empty when none were scraped)."""
    if not server_metrics:
        return []
    if not server_metrics.get("available"):
        return [("Server /metrics", f"unavailable: {server_metrics.get('reason', '')}")]
    rows = [("Server /metrics", "")]
    for label, key in (
        ("Preemptions during run", "num_preemptions_delta"),
        ("Max KV-cache usage", "max_kv_cache_usage_perc"),
        ("Max requests waiting", "max_num_requests_waiting"),
        ("Mean requests waiting", "mean_num_requests_waiting"),
        ("Max requests running", "max_num_requests_running"),
    ):
        if key in server_metrics:
            rows.append((label, _fmt(server_metrics[key])))
    return rows


def _std_ms(values_s: list[float]) -> float | None:
    if not values_s:
        return None
    mean = sum(values_s) / len(values_s)
    return 1000.0 * math.sqrt(sum((v - mean) ** 2 for v in values_s) / len(values_s))


def _peak_output_per_s(samples: list[RequestSample]) -> float:
    """vLLM's max_output_tokens_per_s: most output tokens in one 1-second bucket, from each
    request's chunk times (a request's tokens spread evenly over its content chunks)."""
    ok = [s for s in samples if s.ok and s.ttft_s is not None]
    if not ok:
        return 0.0
    t0 = min(s.send_time for s in ok)
    buckets: dict[int, float] = {}
    for s in ok:
        t = s.send_time + (s.ttft_s or 0.0)  # not None: `ok` keeps only those with a TTFT
        times = [t]
        for g in s.itl_s:
            t += g
            times.append(t)
        per_chunk = s.output_tokens / len(times)
        for c in times:
            b = int(c - t0)
            buckets[b] = buckets.get(b, 0.0) + per_chunk
    return max(buckets.values())


def to_vllm_json(run: BenchRun, extra: dict | None = None) -> dict:
    """A BenchRun as ``vllm bench serve --save-result`` JSON, plus kvtune's samples and facts.

    `extra` is merged at the top level (e.g. ``date``, ``backend``, ``model_id``,
    ``endpoint_type``, ``label``); it must not hold secrets. Non-finite numbers become null.
    """
    m = run.metrics
    samples: list[RequestSample] = run.samples
    ok = [s for s in samples if s.ok]
    wl = run.workload or {}
    open_loop = run.mode == "open"
    out: dict[str, Any] = {
        "duration": run.duration_s,
        "completed": int(m.get("completed", len(ok))),
        "failed": int(m.get("failed", len(samples) - len(ok))),
        "total_input_tokens": int(m.get("total_input_tokens", 0)),
        "total_output_tokens": int(m.get("total_output_tokens", 0)),
        "request_throughput": m.get("request_throughput"),
        "request_goodput": m.get("request_goodput"),
        "output_throughput": m.get("output_throughput"),
        "total_token_throughput": m.get("total_token_throughput"),
        "max_output_tokens_per_s": _peak_output_per_s(samples),
        "max_concurrent_requests": int(m.get("max_concurrent_requests", 0)),
        "num_prompts": len(samples),
        "request_rate": wl.get("rate") if open_loop else "inf",
        "burstiness": wl.get("burstiness", 1.0),
        "max_concurrency": None if open_loop else wl.get("concurrency"),
        "input_lens": [s.prompt_tokens for s in samples],
        "output_lens": [s.output_tokens for s in samples],
        "ttfts": [s.ttft_s if s.ttft_s is not None else 0.0 for s in samples],
        "itls": [list(s.itl_s) for s in samples],
        "start_times": [s.send_time for s in samples],
        "errors": [s.error for s in samples],
    }
    per_metric = {
        "ttft": [s.ttft_s for s in ok if s.ttft_s is not None],
        "tpot": [t for s in ok if (t := s.tpot_s) is not None],
        "itl": [g for s in ok for g in s.itl_s],
        "e2el": [s.e2el_s for s in ok if s.e2el_s is not None],
    }
    for metric in LATENCY_METRICS:
        out[f"mean_{metric}_ms"] = m.get(f"mean_{metric}_ms")
        out[f"median_{metric}_ms"] = m.get(f"median_{metric}_ms")
        out[f"std_{metric}_ms"] = _std_ms(per_metric[metric])
        for p in PERCENTILES:
            out[f"p{p}_{metric}_ms"] = m.get(f"p{p}_{metric}_ms")
    out["kvtune"] = _kvtune_facts(run)
    out.update(extra or {})
    return to_jsonable(out)


def _kvtune_facts(run: BenchRun) -> dict[str, Any]:
    """What kvtune adds beside vLLM's keys: every metric, how the load ran, the samples."""
    return {
        "metrics": dict(run.metrics),
        "mode": run.mode,
        "fell_behind": run.fell_behind,
        "prompt_tokens_exact": run.prompt_tokens_exact,
        "prompt_source": run.prompt_source,
        "endpoint": run.endpoint,
        "workload": run.workload or {},
        "server_metrics": run.server_metrics,
        "notes": list(run.notes),
        "samples": [s.to_dict() for s in run.samples],
        "warmup_requests": len(run.warmup_samples),
    }
