"""The server's ``/metrics`` (Prometheus text) around the measured phase.

Read before the measured requests, every `METRICS_INTERVAL_S` during them and after them:
counters and histogram sums become deltas over the phase, gauges their max/mean/last over the
samples, and vLLM's headline figures (preemptions, KV-cache usage, waiting and running requests)
get stable names (vllm_counters.py knows what vLLM's names mean). A server without the endpoint
(llama-server without ``--metrics``) is reported as unavailable with the reason, never as an
error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from kvtune.bench import vllm_counters
from kvtune.bench.stream import redact_secret

METRICS_PATH = "/metrics"
METRICS_INTERVAL_S = 0.5


def parse_prometheus(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """Prometheus text -> ({metric name: value summed over label sets}, {name: TYPE}).
    Histogram buckets are skipped (their _sum and _count are kept)."""
    values: dict[str, float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3]
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            rest = rest.rpartition("}")[2]
        else:
            name, _, rest = line.partition(" ")
        name = name.strip()
        if name.endswith("_bucket"):
            continue
        try:
            v = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        values[name] = values.get(name, 0.0) + v
    return values, types


def gauge_names(values: dict[str, float], types: dict[str, str]) -> list[str]:
    return [n for n in values if types.get(n) == "gauge"]


def metrics_delta(
    before: dict[str, float], after: dict[str, float], types: dict[str, str], gauge_samples: list[dict[str, float]]
) -> dict[str, Any]:
    """Counter and histogram-sum deltas, gauge max/mean over the samples, and vLLM's headline
    figures under stable names (vllm_counters.py)."""
    deltas = {
        n: after[n] - before[n]
        for n in after
        if n in before and (n.endswith(("_total", "_sum", "_count")) or types.get(n) == "counter")
    }
    gauges: dict[str, dict[str, float]] = {}
    for n in gauge_names(after, types):
        series = [g[n] for g in gauge_samples if n in g] or [after[n]]
        gauges[n] = {"max": max(series), "mean": sum(series) / len(series), "last": series[-1]}
    out: dict[str, Any] = {"available": True, "samples": len(gauge_samples), "deltas": deltas, "gauges": gauges}
    means = {}
    for n, d in deltas.items():
        if n.endswith("_sum"):
            c = deltas.get(n[:-4] + "_count")
            if c:
                means[n[:-4]] = d / c
    out["histogram_means"] = means
    out.update(vllm_counters.headline(deltas, gauges))
    return out


class Scraper:
    """GET /metrics before, during (every `interval_s`) and after the measured phase."""

    def __init__(self, client: httpx.AsyncClient, url: str, interval_s: float, secret: str | None):
        self.client, self.url, self.interval_s, self.secret = client, url, interval_s, secret
        self.before: dict[str, float] | None = None
        self.types: dict[str, str] = {}
        self.samples: list[dict[str, float]] = []
        self.reason = ""
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()

    async def _get(self) -> dict[str, float] | None:
        try:
            r = await self.client.get(self.url, timeout=5.0)
        except httpx.HTTPError as e:
            self.reason = redact_secret(f"GET {METRICS_PATH} failed: {type(e).__name__}: {e}", self.secret)
            return None
        if r.status_code != 200:
            hint = " (llama-server needs --metrics)" if r.status_code in (404, 501) else ""
            self.reason = f"GET {METRICS_PATH} answered HTTP {r.status_code}{hint}"
            return None
        values, types = parse_prometheus(r.text)
        self.types.update(types)
        return values

    async def start(self) -> None:
        self.before = await self._get()
        if self.before is not None:
            self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), self.interval_s)
                return
            except asyncio.TimeoutError:
                pass
            v = await self._get()
            if v is not None:
                self.samples.append({n: v[n] for n in gauge_names(v, self.types)})

    async def finish(self) -> dict[str, Any]:
        if self._task is not None:
            self._stop.set()
            await self._task
        after = await self._get() if self.before is not None else None
        if self.before is None or after is None:
            return {"available": False, "reason": self.reason or "no /metrics"}
        self.samples.append({n: after[n] for n in gauge_names(after, self.types)})
        return metrics_delta(self.before, after, self.types, self.samples)
