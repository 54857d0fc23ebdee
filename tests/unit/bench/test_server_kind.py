"""`kvtune bench` measures a llama-server under the same prompt-cache policy as `kvtune run`
(cache_prompt=false unless told otherwise) and says which policy it used."""

import os
import subprocess
import sys

import pytest

from kvtune.bench.server_kind import PromptCache, ServerKind, detect_server
from kvtune.testing.fake_server import FakeOpenAIServer


def test_llama_server_is_detected_from_props():
    with FakeOpenAIServer() as server:
        assert detect_server(server.base_url).name == "llama-server"
    with FakeOpenAIServer(llama_props=False) as server:
        assert detect_server(server.base_url).name == "unknown"


def test_nothing_listening_is_unknown_not_an_error():
    assert detect_server("http://127.0.0.1:1").name == "unknown"


@pytest.mark.parametrize("policy, body", [(PromptCache.OFF, {"cache_prompt": False}),
                                          (PromptCache.ON, {"cache_prompt": True}),
                                          (PromptCache.SERVER, {})])
def test_cache_policy_becomes_the_request_field_on_llama_server_only(policy, body):
    assert ServerKind("llama-server").cache_body(policy) == body
    assert ServerKind("vllm").cache_body(policy) == {}


def _bench(server, *extra):
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "bench", server.base_url, "--concurrency", "2",
         "--num-requests", "4", "--warmup-requests", "0", "--output-tokens", "4", *extra],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


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
