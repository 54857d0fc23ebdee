"""`kvtune bench` measures a llama-server under the same prompt-cache policy as `kvtune run`
(cache_prompt=false unless told otherwise) and says which policy it used.

The tests here start no process and open no socket: the fake server's answers (the same
`FakeOpenAI` the HTTP fake serves) and a refused connection come through httpx.MockTransport.
Those that start processes are in tests/integration/bench/test_server_kind.py."""

import httpx
import pytest

from kvtune.bench.server_kind import PromptCache, ServerKind, detect_server
from kvtune.testing.fake_openai import FakeOpenAI, JsonReply
from kvtune.workload import Workload


class Answering(httpx.MockTransport):
    """The fake server's GET answers for a sync client (detect_server's), as it serves them over
    HTTP; the paths asked are kept in `asked`."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake, self.asked = fake, []
        super().__init__(self.answer)

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(request.url.path)
        reply = self.fake.get(request.url.path)
        assert isinstance(reply, JsonReply) and not reply.delay_s
        return httpx.Response(reply.status, json=reply.body)


def refused(request: httpx.Request) -> httpx.Response:
    """Nothing listens: every connection is refused, as httpx reports it."""
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


def test_llama_server_is_detected_from_props():
    llama = Answering(FakeOpenAI())
    assert detect_server("http://fake-llama:8080", transport=llama).name == "llama-server"
    assert llama.asked == ["/props"]
    other = Answering(FakeOpenAI(llama_props=False))
    assert detect_server("http://fake-other:8080", transport=other).name == "unknown"
    assert other.asked == ["/props", "/version"]


def test_nothing_listening_is_unknown_not_an_error():
    assert detect_server("http://127.0.0.1:1", transport=httpx.MockTransport(refused)).name == "unknown"


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
