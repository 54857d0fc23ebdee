"""One streamed request (bench/stream.py), as ../shared/MEASUREMENT.md defines it: TTFT to the
first content chunk (a role-only chunk is no token), E2EL to the last content chunk, tokens from
usage or else counted from the stream, a short forced answer a truncation, and every failure
recorded on the sample (never raised) with any API key scrubbed. Canned SSE lines through
httpx.MockTransport, each wait on a VirtualClock: the figures are exactly the script's."""

from __future__ import annotations

import json
from typing import AsyncIterator

import httpx
import pytest

from kvtune.bench.prompts import Prompt
from kvtune.bench.stream import CHAT_PATH, build_body, expected_tokens, one_request, redact_secret
from kvtune.objectives.metrics import RequestSample
from kvtune.testing.virtual_time import VirtualClock
from kvtune.workload import Workload

URL = "http://srv" + CHAT_PATH
KEY = "sk-0123456789abcdef"


def chunk(content: str | None = None, role: str | None = None, **extra) -> str:
    delta = {k: v for k, v in (("content", content), ("role", role)) if v is not None}
    return "data: " + json.dumps({"choices": [{"delta": delta, **extra.pop("choice", {})}], **extra})


def request(script: list[tuple[float, str]], max_tokens: int = 3, timeout_s: float = 10.0, status: int = 200):
    """Send one request whose answer is `script`: (seconds to wait, then this line)."""
    clock = VirtualClock(start=100.0)

    async def lines() -> AsyncIterator[bytes]:
        for wait, line in script:
            await clock.asleep(wait)
            yield (line + "\n\n").encode()

    def handler(r: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=lines())

    async def main() -> RequestSample:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            body = {"max_tokens": max_tokens, "ignore_eos": True}
            return await one_request(client, URL, body, timeout_s, due=99.5, secret=KEY, clock=clock)

    return clock.run(main())


USAGE = chunk(usage={"prompt_tokens": 9, "completion_tokens": 3}, choice={"finish_reason": "length"})


def test_ttft_runs_to_the_first_content_chunk_and_e2el_to_the_last():
    s = request(
        [(0.05, chunk(role="assistant")), (0.2, chunk("a")), (0.01, chunk("b")), (0.02, chunk("c")), (0.5, USAGE)]
        + [(0.0, "data: [DONE]")]
    )
    assert s.ok and s.error == ""
    assert s.ttft_s == pytest.approx(0.25)  # the role-only chunk is not a token
    assert s.itl_s == pytest.approx([0.01, 0.02])
    assert s.e2el_s == pytest.approx(0.28)  # not to the usage chunk 0.5 s later
    assert (s.prompt_tokens, s.output_tokens, s.tokens_from_stream) == (9, 3, False)
    assert s.queue_wait_s == pytest.approx(0.5) and s.send_time == 100.0
    assert s.end_time == pytest.approx(100.78)


def test_without_usage_tokens_are_counted_from_the_stream_and_say_so():
    timings = {"prompt_ms": 5.0, "predicted_n": 3}
    s = request([(0.1, chunk("a")), (0.1, chunk("bc")), (0.0, chunk(timings=timings)), (0.0, "data: [DONE]")])
    assert s.ok and s.tokens_from_stream and s.output_tokens == 3 and s.server_timings == timings
    one_per_chunk = request([(0.1, chunk("a")), (0.1, chunk("b")), (0.1, chunk("c"))], max_tokens=3)
    assert one_per_chunk.ok and one_per_chunk.output_tokens == 3 and one_per_chunk.tokens_from_stream


def test_a_forced_answer_shorter_than_max_tokens_is_a_truncated_failure():
    s = request([(0.1, chunk("a", choice={"finish_reason": "length"})), (0.0, "data: [DONE]")], max_tokens=4)
    assert not s.ok and s.truncated
    assert s.error == "truncated: 1 of 4 tokens (finish_reason length)"


@pytest.mark.parametrize(
    ("script", "error"),
    [
        # llama-server's error event: its JSON is kept whole (a data: error object gives its message)
        ([(0.1, 'error: {"message": "slot unavailable"}')], 'server error in stream: {"message": "slot unavailable"}'),
        ([(0.1, 'data: {"error": {"message": "boom"}}')], "server error in stream: boom"),
        ([(0.1, "data: {not json")], "invalid JSON in stream: {not json"),
        ([(0.1, ": keep-alive"), (0.0, "data: [DONE]")], "stream ended with no content"),
    ],
)
def test_a_failure_in_the_stream_is_recorded_on_the_sample(script, error):
    s = request(script)
    assert not s.ok and s.error == error and s.end_time is not None


def test_an_http_error_keeps_the_status_and_scrubs_the_key():
    s = request([(0.0, f"invalid key {KEY}")], status=401)
    assert not s.ok and s.error.startswith("HTTP 401: invalid key ***") and KEY not in s.error


def test_the_request_timeout_runs_on_the_clock():
    s = request([(0.1, chunk("a")), (30.0, chunk("b"))], timeout_s=5.0)
    assert not s.ok and s.error == "timeout: no complete response within 5 s"
    assert s.end_time - s.send_time == pytest.approx(5.0)  # virtual seconds, exactly the timeout


def test_a_connection_error_is_recorded_never_raised():
    clock = VirtualClock()

    def refuse(r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused for {KEY[:8]}", request=r)

    async def main() -> RequestSample:
        async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
            return await one_request(client, URL, {}, 5.0, due=0.0, secret=KEY, clock=clock)

    s = clock.run(main())
    assert not s.ok and s.error == "ConnectError: refused for ***"


def test_the_chat_body_forces_the_output_length_and_extra_body_wins():
    w = Workload(output_tokens=16)
    body = build_body("m", Prompt(user="hi", system="sys"), w, {"cache_prompt": False, "temperature": 0.5})
    assert body["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert (body["max_tokens"], body["stream"], body["ignore_eos"]) == (16, True, True)
    assert body["stream_options"] == {"include_usage": True}
    assert body["cache_prompt"] is False and body["temperature"] == 0.5
    assert expected_tokens(body) == 16


def test_the_completions_body_sends_the_text_as_prompt():
    body = build_body("m", Prompt(user="hi", system="sys"), Workload(endpoint="completions"), None)
    assert body["prompt"] == "sys hi" and "messages" not in body
    assert build_body("m", "plain", Workload(), None)["messages"] == [{"role": "user", "content": "plain"}]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"ignore_eos": True, "max_tokens": 64}, 64),
        ({"ignore_eos": True, "max_completion_tokens": 8}, 8),
        ({"ignore_eos": False, "max_tokens": 64}, None),
        ({"max_tokens": 64}, None),
        ({"ignore_eos": True}, None),
        ({"ignore_eos": True, "max_tokens": True}, None),
    ],
)
def test_expected_tokens(body: dict, expected: int | None) -> None:
    """(moved from tests/unit/bench/test_truncation.py)"""
    assert expected_tokens(body) == expected


def test_redact_scrubs_the_key_whole_and_the_parts_servers_echo():
    assert redact_secret(f"bad key {KEY}", KEY) == "bad key ***"
    assert redact_secret(f"bad key {KEY[:8]}...{KEY[-6:]}", KEY) == "bad key ***...***"
    assert redact_secret("short sk-1 here", "sk-1") == "short *** here"
    assert redact_secret("nothing to hide", None) == "nothing to hide"
