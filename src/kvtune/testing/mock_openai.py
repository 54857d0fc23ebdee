"""The fake OpenAI server as an ``httpx.MockTransport``, on an injected clock.

`MockOpenAI` answers exactly as the HTTP fake server does (fake_openai.py: same settings, same
faults, same events) but without sockets or threads, and it waits on `clock`: with a
`VirtualClock` (virtual_time.py) a TTFT of 200 ms is exactly 200 ms of the client's clock and
costs no wall time, so tests of the load client check definitions to the microsecond on any
machine. Give ``BenchOptions(transport=mock.transport(), clock=mock.clock)``; the base URL is
not dialled (any ``http://`` URL, e.g. `MockOpenAI.base_url`). A dropped connection (a crashed
fake) is ``httpx.RemoteProtocolError``, as httpx reports a peer that closed without answering.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import closing
from typing import Any, AsyncIterator

import httpx

from kvtune.clock import Clock
from kvtune.testing.fake_openai import HANG, FakeOpenAI, JsonReply, Reply, StreamReply
from kvtune.testing.virtual_time import VirtualClock


class MockOpenAI(FakeOpenAI):
    """`FakeOpenAI` carried by an httpx transport; waits and the start-up delay run on `clock`
    (a fresh `VirtualClock` when none is given)."""

    base_url = "http://fake-openai"

    def __init__(self, *args: Any, clock: Clock | None = None, **kwargs: Any) -> None:
        self.clock: Clock = clock if clock is not None else VirtualClock()
        super().__init__(*args, now=self.clock.monotonic, **kwargs)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            reply = self.get(request.url.path)
        else:
            reply = self.post(request.url.path, request.content, request.headers.get("authorization"))
        return await self._respond(reply, request)

    async def _respond(self, reply: Reply, request: httpx.Request) -> httpx.Response:
        if isinstance(reply, StreamReply):
            return httpx.Response(200, content=self._play(reply), headers={"content-type": "text/event-stream"})
        if isinstance(reply, JsonReply):
            if reply.delay_s:
                await self.clock.asleep(reply.delay_s)
            return httpx.Response(
                reply.status, content=json.dumps(reply.body).encode(), headers={"content-type": "application/json"}
            )
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    async def _play(self, reply: StreamReply) -> AsyncIterator[bytes]:
        with closing(reply.steps) as steps:  # a cancelled request ends the stream's in-flight count
            for step in steps:
                if step is HANG:
                    await asyncio.Event().wait()  # never finishes: the client's timeout ends it
                elif isinstance(step, bytes):
                    yield step
                else:
                    await self.clock.asleep(step)
