"""`kvtune bench`'s client against a real llama-server with the demo model.

One server, measured twice: once as `kvtune bench` calls the client (any OpenAI-compatible
server: no backend-specific body, /metrics scraped, exact prompts from the GGUF vocabulary) and
once as the tuner calls it (``run(url, workload, BenchOptions(served_model_name,
extra_body=launcher.request_extra_body(), on_phase=...))``). The two paths agree when each one's
clock brackets the server's own clock request by request: the client cannot see the first token
before the server has processed the prompt, nor the last before it has decoded them all. That
holds on any machine under any load; how close the two paths' latencies come is a figure of the
machine's load (pooled medians 624 vs 974 ms once on a busy CI box), printed here, not asserted.
The GGUF route's exact prompt sizes are checked against the server's own /tokenize.
"""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from kvtune.bench.client import BenchOptions, detect_model, run
from kvtune.bench.prompts import exact_prompt
from kvtune.bench.results_format import metrics_table, to_vllm_json
from kvtune.bench.tokenizer import load_tokenizer
from kvtune.errors import KvtuneError
from kvtune.launchers.llama_server import find_llama_server
from kvtune.workload import Workload
from tests.e2e.conftest import demo_llama_server

pytestmark = pytest.mark.e2e
# Each round runs the two paths at the same time (two threads, 2 users each on 8 slots).
ROUNDS = 3
# llama-server reports its timings in ms, measured on its own clock; its prompt time starts
# after the HTTP request is parsed and its decode time ends before the last chunk is written,
# so the client's spans are longer. The slack covers rounding and the two clocks' granularity.
CLOCK_SLACK_MS = 2.0
WL = Workload(
    concurrency=2, prompt_tokens=96, output_tokens=24, num_requests=8, warmup_requests=2, request_timeout_s=120
)


def _pooled(runs) -> dict[str, float]:
    """Output throughput and median TTFT over all rounds of one path."""
    samples = [s for r in runs for s in r.samples]
    ttfts = sorted(1000.0 * s.ttft_s for s in samples if s.ok)
    mid = len(ttfts) // 2
    return {
        "output_throughput": sum(s.output_tokens for s in samples if s.ok) / sum(r.duration_s for r in runs),
        "median_ttft_ms": (ttfts[mid] + ttfts[~mid]) / 2,
    }


def _brackets_the_servers_clock(s) -> None:
    """The client's TTFT covers the server's prompt time, and its end-to-end latency covers the
    server's prompt and decode time, for this one request."""
    t = s.server_timings
    assert t and s.ttft_s is not None and s.e2el_s is not None, s
    assert 1000.0 * s.ttft_s >= t["prompt_ms"] - CLOCK_SLACK_MS, (s.ttft_s, t)
    assert 1000.0 * s.e2el_s >= t["prompt_ms"] + t["predicted_ms"] - CLOCK_SLACK_MS, (s.e2el_s, t)
    assert t["predicted_n"] == s.output_tokens, (t, s.output_tokens)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    try:
        binary = find_llama_server()
    except KvtuneError as e:
        pytest.skip(str(e))
    # 8 slots: the two concurrent paths (2 users each) never wait for a slot.
    flags = {"parallel": 8, "ctx-per-slot": 512, "threads": 2}
    log = tmp_path_factory.mktemp("bench-e2e") / "server.log"
    with demo_llama_server(binary, flags, log, extra_args=("--metrics",)) as started:
        yield started


def test_bench_path_and_tuner_path_agree(server) -> None:
    proc, launcher, model = server
    url = proc.base_url
    name = detect_model(url)  # as `kvtune bench URL` without --model
    bench_runs, tuner_runs = [], []
    phases: list[str] = []

    def bench_path():  # as `kvtune bench`: nothing backend-specific, exact prompts, /metrics
        bench_runs.append(run(url, WL, BenchOptions(name, tokenizer=str(model), scrape_metrics=True)))

    def tuner_path():  # as the tuner (loop.py): served name, launcher's extra body, phases
        tuner_runs.append(
            run(
                url,
                WL,
                BenchOptions(
                    launcher.served_model_name(), extra_body=launcher.request_extra_body(), on_phase=phases.append
                ),
            )
        )

    load_tokenizer(str(model))  # read the vocabulary before the clocks start
    for _ in range(ROUNDS):
        threads = [threading.Thread(target=f) for f in (bench_path, tuner_path)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert len(bench_runs) == len(tuner_runs) == ROUNDS
    assert phases == ["warmup", "measuring"] * ROUNDS
    for r in bench_runs + tuner_runs:
        assert r.metrics["error_rate"] == 0.0, [s.error for s in r.samples if not s.ok]
        assert all(s.output_tokens == WL.output_tokens for s in r.samples)
    b, t = _pooled(bench_runs), _pooled(tuner_runs)
    print(f"\nbench path {b}\ntuner path {t}")  # the machine's load, not a claim
    for r in bench_runs + tuner_runs:
        for s in r.samples:
            _brackets_the_servers_clock(s)
    # One computation of the figures for both paths: the same metrics, from the same samples.
    assert set(bench_runs[0].metrics) == set(tuner_runs[0].metrics)
    for r in bench_runs + tuner_runs:
        assert r.metrics["output_throughput"] == pytest.approx(
            sum(s.output_tokens for s in r.samples if s.ok) / r.duration_s
        )
    bench, tuner = bench_runs[-1], tuner_runs[-1]
    # llama-server's own timings made it into both summaries.
    for m in (bench.metrics, tuner.metrics):
        assert m["server_timings_requests"] == WL.num_requests
        assert 0 < m["mean_prompt_ms_server"] < m["mean_ttft_ms"]
        assert m["mean_queue_ms_server"] >= -5.0
    # Exact prompt text sizes: the chat template adds the same overhead to every request.
    assert bench.prompt_tokens_exact and not tuner.prompt_tokens_exact
    assert len({s.prompt_tokens for s in bench.samples}) == 1
    assert bench.samples[0].prompt_tokens > WL.prompt_tokens
    assert bench.server_metrics and bench.server_metrics["available"], bench.server_metrics
    j = to_vllm_json(bench, {"model_id": name, "backend": "openai-chat"})
    json.dumps(j, allow_nan=False)
    assert j["completed"] == WL.num_requests and len(j["ttfts"]) == WL.num_requests
    assert metrics_table(bench.metrics)


def test_metrics_deltas_cover_the_measured_phase_only(server) -> None:
    proc, launcher, _ = server
    wl = Workload(concurrency=2, prompt_tokens=48, output_tokens=12, num_requests=6, warmup_requests=3)
    res = run(proc.base_url, wl, BenchOptions(launcher.served_model_name(), scrape_metrics=True))
    sm = res.server_metrics
    assert sm and sm["available"], sm
    predicted = sm["deltas"]["llamacpp:tokens_predicted_total"]
    assert predicted == wl.num_requests * wl.output_tokens  # warm-up's 36 tokens left out
    # The server counts prompt tokens it processed; the ones its cache served (the chat
    # template's default system prompt is the same for every request) are in timings.cache_n.
    prompt = sm["deltas"]["llamacpp:prompt_tokens_total"]
    cached = sum(s.server_timings.get("cache_n", 0) for s in res.samples)
    assert prompt + cached == res.metrics["total_input_tokens"]
    assert "llamacpp:requests_processing" in sm["gauges"]


def test_exact_prompts_match_llama_server_tokenize(server) -> None:
    proc, _, model = server
    words = load_tokenizer(str(model)).single_token_words()
    with httpx.Client(timeout=30) as c:
        for n in (1, 7, 128, 500):
            p = exact_prompt(3, n, seed=0, words=words, salt="e2e")
            tokens = c.post(proc.base_url + "/tokenize", json={"content": p}).json()["tokens"]
            assert len(tokens) == n


def test_completions_endpoint_usage_counts_exact_prompts(server) -> None:
    proc, launcher, model = server
    wl = Workload(
        concurrency=2, prompt_tokens=100, output_tokens=8, num_requests=4, warmup_requests=1, endpoint="completions"
    )
    res = run(proc.base_url, wl, BenchOptions(launcher.served_model_name(), tokenizer=str(model)))
    assert all(s.ok for s in res.samples), [s.error for s in res.samples]
    bos = {s.prompt_tokens - 100 for s in res.samples}
    assert bos in ({0}, {1})  # exact text, plus a BOS token if the model adds one
    assert all(s.output_tokens == 8 for s in res.samples)


def test_open_loop_against_the_real_server(server) -> None:
    proc, launcher, _ = server
    wl = Workload(
        mode="open",
        rate=4.0,
        num_requests=8,
        prompt_tokens=64,
        output_tokens=16,
        warmup_requests=2,
        concurrency=2,
        seed=1,
    )
    res = run(proc.base_url, wl, BenchOptions(launcher.served_model_name()))
    assert all(s.ok for s in res.samples), [s.error for s in res.samples]
    # Sent on the schedule's clock: never before a due time, and a lag past the threshold is
    # flagged (whether this machine keeps up is benchmarks/client_ceiling.py's figure).
    assert all(s.intended_send_time is not None and s.schedule_lag_s >= 0 for s in res.samples)
    m = res.metrics
    assert m["offered_rate"] == 4.0 and m["schedule_lag_threshold_ms"] == 50.0
    assert res.fell_behind == (m["p99_schedule_lag_ms"] > m["schedule_lag_threshold_ms"])


def test_shared_prefix_hits_the_prompt_cache(server) -> None:
    proc, launcher, model = server
    wl = Workload(
        concurrency=1,
        prompt_tokens=32,
        output_tokens=4,
        num_requests=6,
        warmup_requests=1,
        shared_prefix_fraction=1.0,
        shared_prefix_tokens=256,
    )
    res = run(
        proc.base_url,
        wl,
        BenchOptions(launcher.served_model_name(), tokenizer=str(model), extra_body={"cache_prompt": True}),
    )
    assert all(s.ok for s in res.samples)
    assert res.metrics["mean_cached_prompt_tokens_server"] >= 200  # the shared 256 were reused
