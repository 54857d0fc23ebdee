"""`kvtune bench` measures a llama-server under the same prompt-cache policy as `kvtune run`
(cache_prompt=false unless told otherwise) and says which policy it used.

The tests here start no process; those that do are in tests/integration/bench/test_server_kind.py."""

import pytest

from kvtune.bench.server_kind import PromptCache, ServerKind, detect_server
from kvtune.testing.fake_server import FakeOpenAIServer
from kvtune.workload import Workload


def test_llama_server_is_detected_from_props():
    with FakeOpenAIServer() as server:
        assert detect_server(server.base_url).name == "llama-server"
    with FakeOpenAIServer(llama_props=False) as server:
        assert detect_server(server.base_url).name == "unknown"


def test_nothing_listening_is_unknown_not_an_error():
    assert detect_server("http://127.0.0.1:1").name == "unknown"


@pytest.mark.parametrize(
    "policy, body",
    [(PromptCache.OFF, {"cache_prompt": False}), (PromptCache.ON, {"cache_prompt": True}), (PromptCache.SERVER, {})],
)
def test_cache_policy_becomes_the_request_field_on_llama_server_only(policy, body):
    assert ServerKind("llama-server").cache_body(policy) == body
    assert ServerKind("vllm").cache_body(policy) == {}


SYNTHETIC = Workload()
CONVERSATIONS = Workload(multiturn=True)
TRACE = Workload(trace="azure-conv")


def test_workloads_that_reuse_prefixes_are_measured_with_the_cache_on_and_say_so():
    llama = ServerKind("llama-server")
    assert (
        llama.describe_policy(PromptCache.OFF, SYNTHETIC)
        == "prompt cache: off (cache_prompt=false sent, as kvtune run measures)"
    )
    assert llama.describe_policy(PromptCache.ON, SYNTHETIC) == "prompt cache: on (cache_prompt=true sent)"
    for reusing in (CONVERSATIONS, TRACE):
        assert llama.describe_policy(PromptCache.ON, reusing).endswith(
            "(cache_prompt=true sent, as kvtune run measures)"
        )
        assert llama.describe_policy(PromptCache.OFF, reusing) == "prompt cache: off (cache_prompt=false sent)"
    vllm = ServerKind("vllm")
    assert "each prompt has a unique nonce" in vllm.describe_policy(PromptCache.OFF, SYNTHETIC)
    assert "turns share their history" in vllm.describe_policy(PromptCache.ON, CONVERSATIONS)
    assert "share prefixes as the workload does" in vllm.describe_policy(PromptCache.ON, TRACE)
