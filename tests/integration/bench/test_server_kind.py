"""`kvtune bench` measures a llama-server under the same prompt-cache policy as `kvtune run`
(cache_prompt=false unless told otherwise) and says which policy it used.

Here the tests that start processes; the rest are in tests/unit/bench/test_server_kind.py."""

import os
import subprocess
import sys

from kvtune.testing.fake_server import FakeOpenAIServer


def _bench(server, *extra):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            "bench",
            server.base_url,
            "--concurrency",
            "2",
            "--num-requests",
            "4",
            "--set",
            "workload.warmup_requests=0",
            "--output-tokens",
            "4",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_bench_defaults_to_the_tuners_policy_and_says_so():
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.001) as server:
        r = _bench(server)
        assert r.returncode == 0, r.stderr
        assert "server: llama-server; prompt cache: off (cache_prompt=false sent, as kvtune run measures)" in r.stdout
        assert server.received and all(b.get("cache_prompt") is False for b in server.received)


def test_bench_prompt_cache_on_and_bad_value():
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.001) as server:
        r = _bench(server, "--prompt-cache", "on")
        assert r.returncode == 0, r.stderr
        assert all(b.get("cache_prompt") is True for b in server.received)
        bad = _bench(server, "--prompt-cache", "maybe")
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--prompt-cache" in bad.stderr
