"""Multi-turn conversations against the real CPU vLLM: prefix caching on vs off, one server each.

The demo model converted to an HF folder, started as the tuner starts it (VllmLauncher.command,
``--enforce-eager``, ``--kv-cache-memory-bytes``), once with ``--enable-prefix-caching`` and
once with ``--no-enable-prefix-caching``: two starts, the fewest that can show what the flag
does. The same conversation's shape against each (long history, tiny answers: turn 4 re-sends
~400 tokens of history for 128 new ones), /metrics scraped as the tuner scrapes vLLM. The KV
blocks are 32 tokens (``--block-size 32``, one of the tuner's CPU choices; vLLM's CPU default
is 128): the cache serves whole blocks of history, so small blocks let it serve nearly all of
a short turn's history. Without the cache a later turn prefills 2-4x the tokens it does with
it (turns 2-4: ~270/400/540 vs ~140). Asserted: later turns' TTFT is lower with the cache,
and vLLM's own counters (``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``)
give a hit rate above zero only with it. About a minute per start on an idle 2-core machine;
the requests prefill ~1,500 tokens without the cache (3 turns of 300 in 2 conversations took
~4,000; on a loaded CPU vLLM prefills only tens of tokens a second).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvtune.bench.client import BenchOptions, BenchRun, run
from kvtune.knobs import Candidate
from kvtune.launchers.process import ServerProcess, free_port
from kvtune.launchers.vllm import MiB, VllmLauncher, id_list
from kvtune.workload import Workload

pytestmark = pytest.mark.e2e

STARTUP_TIMEOUT_S = 300.0
WL = Workload(
    multiturn=True,
    turns=4,
    prompt_tokens=128,
    output_tokens=2,
    concurrency=1,
    num_requests=4,  # one conversation of four turns
    warmup_requests=1,
    request_timeout_s=120,
)


@pytest.fixture(scope="module")
def launcher(vllm_importable: None) -> VllmLauncher:
    from kvtune.launchers.hf_model import demo_hf_model_path

    return VllmLauncher.create(str(demo_hf_model_path()))


def _measure(launcher: VllmLauncher, prefix_caching: bool, log: Path) -> BenchRun:
    env = {"VLLM_CPU_OMP_THREADS_BIND": id_list(launcher.cpu_ids)} if len(launcher.cpu_ids) > 1 else {}
    flags = {
        "max-model-len": 2048,
        "max-num-seqs": 2,
        "kv-cache-memory-bytes": 256 * MiB,
        "block-size": 32,
        "enable-prefix-caching": prefix_caching,
    }
    candidate = Candidate(flags=flags, env=env)
    assert launcher.precheck(candidate, WL) is None
    port = free_port()
    argv = launcher.command(candidate, port)
    assert ("--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching") in argv
    with ServerProcess(
        argv=argv, env=launcher.environment(candidate), log_path=log, port=port, health_path=launcher.health_path
    ) as server:
        server.wait_ready(STARTUP_TIMEOUT_S)
        options = BenchOptions(
            launcher.served_model_name(), extra_body=launcher.request_extra_body(), scrape_metrics=True
        )
        return run(server.base_url, WL, options)


def test_prefix_caching_makes_later_turns_faster_and_vllm_counts_the_hits(
    launcher: VllmLauncher, tmp_path: Path
) -> None:
    runs = {on: _measure(launcher, on, tmp_path / f"server-{on}.log") for on in (False, True)}
    for r in runs.values():
        assert [s.error for s in r.samples if not s.ok] == []
        assert [(s.conversation, s.turn) for s in r.samples] == [(0, k) for k in (1, 2, 3, 4)]
        assert r.server_metrics is not None and r.server_metrics["available"]
    off, on = runs[False].metrics, runs[True].metrics
    print(f"later-turn TTFT median: {on['median_ttft_ms_later']:.0f} ms cached, "
          f"{off['median_ttft_ms_later']:.0f} ms uncached "
          f"(ratio {on['median_ttft_ms_later'] / off['median_ttft_ms_later']:.2f}); "
          f"hit rate {on['prefix_cache_hit_rate']:.2f} / {off['prefix_cache_hit_rate']}")  # fmt: skip
    assert on["median_ttft_ms_later"] < off["median_ttft_ms_later"]
    assert on["prefix_cache_hit_rate"] > 0.3
    assert math.isnan(off["prefix_cache_hit_rate"]) or off["prefix_cache_hit_rate"] == 0.0
