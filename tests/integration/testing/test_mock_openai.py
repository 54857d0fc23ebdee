"""The fake OpenAI server as a MockTransport: the same answers as over HTTP, on virtual time.

Here the comparison with the fake served over real HTTP (FakeOpenAIServer: a listening socket in
a thread, real waits), which tests/unit may not open; the mock's own tests are in
tests/unit/testing/test_mock_openai.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from kvtune.testing.fake_server import FakeOpenAIServer
from kvtune.testing.mock_openai import MockOpenAI

CHAT = {"model": "m", "stream": True, "max_tokens": 3, "messages": [{"role": "user", "content": "one two three"}]}


async def _read(client: httpx.AsyncClient, url: str, now) -> list[tuple[float, str]]:
    out: list[tuple[float, str]] = []
    async with client.stream("POST", url, json=CHAT) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        async for line in r.aiter_lines():
            if line:
                out.append((now(), line))
    return out


def _events(lines: list[tuple[float, str]]) -> list[object]:
    out: list[object] = []
    for _, line in lines:
        data = line.removeprefix("data: ")
        obj = data if data == "[DONE]" else json.loads(data)
        if isinstance(obj, dict):
            obj.pop("created")
            obj.get("timings", {}).pop("predicted_ms", None)  # measured on each carrier's clock
        out.append(obj)
    return out


def test_the_mock_streams_what_the_http_fake_streams_at_its_delays() -> None:
    mock = MockOpenAI(ttft_s=0.2, itl_s=0.02)

    async def over_mock() -> list[tuple[float, str]]:
        async with httpx.AsyncClient(transport=mock.transport()) as c:
            return await _read(c, mock.base_url + "/v1/chat/completions", mock.clock.monotonic)

    mocked = mock.clock.run(over_mock())
    with FakeOpenAIServer(ttft_s=0.2, itl_s=0.02) as srv:  # same settings; its waits are real

        async def over_http() -> list[tuple[float, str]]:
            async with httpx.AsyncClient() as c:
                return await _read(c, srv.base_url + "/v1/chat/completions", lambda: 0.0)

        real = asyncio.run(over_http())
    assert _events(mocked) == _events(real)  # the same events, but for the wall-clock stamp
    times = [t for t, _ in mocked]
    # role chunk at once, first token at 0.2 s, then one every 0.02 s; usage and [DONE] at once
    assert times == pytest.approx([0.0, 0.2, 0.22, 0.24, 0.24, 0.24], abs=1e-9)
    assert mock.received == [CHAT] and mock.active == 0
