"""The fake OpenAI server as a MockTransport: the same answers as over HTTP, on virtual time.

The tests here open no socket; the one that compares the mock with the fake over real HTTP (a
listening socket, real waits) is in tests/integration/testing/test_mock_openai.py."""

from __future__ import annotations

import httpx
import pytest

from kvtune.knobs import Candidate
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.testing.fake_server import settings_from_argv
from kvtune.testing.mock_openai import MockOpenAI

CHAT = {"model": "m", "stream": True, "max_tokens": 3, "messages": [{"role": "user", "content": "one two three"}]}


def test_startup_delay_and_crash_on_the_mock() -> None:
    mock = MockOpenAI(startup_delay_s=5.0, crash_after_requests=1, ttft_s=0.0, itl_s=0.0)

    async def main() -> list[object]:
        out: list[object] = []
        async with httpx.AsyncClient(transport=mock.transport()) as c:
            out.append((await c.get(mock.base_url + "/health")).status_code)
            await mock.clock.asleep(5.0)
            out.append((await c.get(mock.base_url + "/health")).status_code)
            out.append(
                (await c.post(mock.base_url + "/v1/chat/completions", json={**CHAT, "stream": False})).json()["usage"]
            )
            try:
                await c.post(mock.base_url + "/v1/chat/completions", json=CHAT)
            except httpx.RemoteProtocolError as e:
                out.append(type(e).__name__)
        return out

    assert mock.clock.run(main()) == [
        503,
        200,
        {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
        "RemoteProtocolError",
    ]
    assert mock.crashed and mock.chat_requests == 2


def test_settings_come_from_the_fake_launchers_command_line() -> None:
    argv = FakeLauncher(base_ttft_ms=200, base_itl_ms=20, always={"fail-status": 503}).command(
        Candidate(flags={"speed": 4}), port=8123
    )
    s = settings_from_argv(argv)
    assert s["ttft_s"] == pytest.approx(0.05) and s["itl_s"] == pytest.approx(0.005)
    assert s["fail_status"] == 503 and s["crash_after_requests"] is None
