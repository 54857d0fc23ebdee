"""How fast can kvtune's load client go? Its own ceiling, so nobody mistakes it for the server's.

Three measurements, all with zero server delays:

1. closed loop against the fake OpenAI server in its own process (real sockets, real SSE over
   loopback; the fake server's Python threads are part of the figure, so this is a floor on the
   client's ceiling) at concurrency 1, 16, 64, 256;
2. the same loops through ``httpx.MockTransport`` (no sockets, no server: the client's parsing and
   bookkeeping alone, an upper bound);
3. the open loop: the highest arrival rate (req/s) the client keeps to its schedule without
   flagging ``fell_behind``, against the fake server process.

Each line gives requests/s, streamed content chunks/s (one chunk = one token here) and the
client process's CPU use (100% = one core busy: the client, not the server, is the limit), and
the ratio to a reference rate. The reference is a fast server the tuner may face:
REFERENCE_TOK_S = 5,000 output tokens/s streamed one token per chunk, about what vLLM serves
from an 8B model on one H100/H200 at high concurrency; the demo (SmolLM2-135M on a few CPU
cores, 8 users x 64 tokens) streams well under 1,000 tokens/s. A ratio above 1 means the client
can drink faster than that server can pour.

Run: ``python benchmarks/client_ceiling.py [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import httpx

from kvtune.bench.client import run
from kvtune.workload import Workload

REFERENCE_TOK_S = 5000.0
TOKENS = 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_fake() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvtune.testing.fake_server", "--port", str(port), "--ttft-ms", "0", "--itl-ms", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("fake server did not start")


def _mock_transport() -> httpx.MockTransport:
    events = [b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n']
    events += [b'data: {"choices":[{"index":0,"delta":{"content":" tok"}}]}\n\n'] * TOKENS
    events.append(b'data: {"choices":[],"usage":{"prompt_tokens":200,"completion_tokens":%d}}\n\n' % TOKENS)
    events.append(b"data: [DONE]\n\n")

    async def handler(request: httpx.Request) -> httpx.Response:
        async def body():
            for e in events:
                yield e

        return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def closed(url: str, concurrency: int, requests: int, transport=None) -> dict:
    wl = Workload(
        concurrency=concurrency,
        prompt_tokens=200,
        output_tokens=TOKENS,
        num_requests=requests,
        warmup_requests=min(concurrency, 32),
        request_timeout_s=120,
    )
    cpu0, wall0 = time.process_time(), time.perf_counter()
    res = run(url, wl, "fake", transport=transport)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    ok = [s for s in res.samples if s.ok]
    chunks = sum(len(s.itl_s) + 1 for s in ok)
    return {
        "concurrency": concurrency,
        "requests": requests,
        "failed": len(res.samples) - len(ok),
        "req_s": len(ok) / res.duration_s,
        "chunks_s": chunks / res.duration_s,
        "client_cpu_pct": 100.0 * cpu / wall,
        "p50_ttft_ms": res.metrics["median_ttft_ms"],
        "ratio_to_reference": (chunks / res.duration_s) / REFERENCE_TOK_S,
    }


def open_ceiling(url: str, rates: list[float], duration_s: float) -> list[dict]:
    out = []
    for rate in rates:
        wl = Workload(
            mode="open",
            rate=rate,
            duration_s=duration_s,
            prompt_tokens=200,
            output_tokens=TOKENS,
            concurrency=8,
            warmup_requests=8,
            request_timeout_s=120,
            arrival="poisson",
        )
        res = run(url, wl, "fake")
        out.append(
            {
                "rate": rate,
                "sent": len(res.samples),
                "fell_behind": res.fell_behind,
                "p99_lag_ms": res.metrics.get("p99_schedule_lag_ms"),
                "achieved_req_s": res.metrics["request_throughput"],
                "failed": int(res.metrics["failed"]),
            }
        )
        if res.fell_behind:
            break
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests per level")
    ap.add_argument("--levels", default="1,16,64,256")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    per = 2 if args.quick else 4
    results: dict = {
        "cpu_count": os.cpu_count(),
        "tokens_per_request": TOKENS,
        "reference_tok_s": REFERENCE_TOK_S,
        "python": sys.version.split()[0],
    }
    try:
        la = os.getloadavg()
        results["load_avg_before"] = la
    except OSError:
        pass
    proc, url = _start_fake()
    try:
        print(
            f"client ceiling: {TOKENS} one-token chunks per request, zero server delay, "
            f"{os.cpu_count()} CPUs, load avg {results.get('load_avg_before', ('?',))[0]}"
        )
        print(f"reference: {REFERENCE_TOK_S:.0f} tok/s (fast GPU server, one token per chunk)\n")
        hdr = f"{'path':<14}{'conc':>6}{'req/s':>10}{'chunks/s':>11}{'client CPU':>12}{'x ref':>8}"
        print(hdr)
        for name, transport in (("fake server", None), ("mock (client)", _mock_transport())):
            rows = []
            for c in levels:
                n = max(per * c, 100 if args.quick else 200)
                target = url if transport is None else "http://mock"
                r = closed(target, c, n, transport)
                rows.append(r)
                print(
                    f"{name:<14}{c:>6}{r['req_s']:>10.0f}{r['chunks_s']:>11.0f}"
                    f"{r['client_cpu_pct']:>11.0f}%{r['ratio_to_reference']:>8.1f}"
                    + (f"  ({r['failed']} failed)" if r["failed"] else "")
                )
            results["fake_server" if transport is None else "mock_transport"] = rows
        rates = [25.0, 50.0, 100.0, 200.0, 400.0, 800.0]
        ol = open_ceiling(url, rates, 1.0 if args.quick else 2.0)
        results["open_loop"] = ol
        kept = [r["rate"] for r in ol if not r["fell_behind"]]
        print("\nopen loop (Poisson, fake server):")
        for r in ol:
            print(
                f"  {r['rate']:>6.0f} req/s offered: {r['sent']} sent, p99 send lag "
                f"{r['p99_lag_ms']:.1f} ms, {'FELL BEHIND' if r['fell_behind'] else 'on schedule'}"
            )
        print(
            f"highest rate kept on schedule: {max(kept) if kept else 0:.0f} req/s "
            f"(= {max(kept) * TOKENS if kept else 0:.0f} tok/s at {TOKENS} tokens/request)"
        )
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=10)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
