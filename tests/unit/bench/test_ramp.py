"""The closed loop's users ramp in (BenchOptions.ramp_s) instead of starting as one burst.

The offsets are pure (`ramp_offset`); against a MockTransport on virtual time the users' send
times are exactly their ramp offsets, whatever the load on the machine.
"""

from __future__ import annotations

import json

import httpx
import pytest

from kvtune.bench.client import BenchOptions, ramp_offset, run
from kvtune.testing.virtual_time import VirtualClock
from kvtune.workload import Workload

_BODY = (
    "".join(
        f"data: {json.dumps(e)}\n\n"
        for e in (
            {"choices": [{"delta": {"content": "x"}}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        )
    ).encode()
    + b"data: [DONE]\n\n"
)


def _transport() -> httpx.MockTransport:
    return httpx.MockTransport(
        lambda request: httpx.Response(200, content=_BODY, headers={"content-type": "text/event-stream"})
    )


def test_ramp_offsets_spread_the_first_wave_only() -> None:
    assert [ramp_offset(i, 4, 2.0) for i in range(6)] == [0.0, 0.5, 1.0, 1.5, 0.0, 0.0]
    assert [ramp_offset(i, 4, 0.0) for i in range(4)] == [0.0] * 4  # no ramp: all at once
    assert ramp_offset(0, 1, 5.0) == 0.0
    assert BenchOptions("m").ramp_s == 0.0  # the default keeps the closed loop as it was


@pytest.mark.parametrize("warmup", [0, 4])
def test_users_start_staggered_over_the_ramp(warmup: int) -> None:
    wl = Workload(
        concurrency=4, prompt_tokens=8, output_tokens=1, num_requests=4, warmup_requests=warmup, request_timeout_s=10.0
    )
    res = run("http://fake", wl, BenchOptions("m", transport=_transport(), ramp_s=0.4, clock=VirtualClock()))
    for phase in [res.samples] + ([res.warmup_samples] if warmup else []):
        t0 = min(s.send_time for s in phase)
        sends = [s.send_time - t0 for s in phase]  # request i is user i's first
        assert sends == pytest.approx([0.0, 0.1, 0.2, 0.3], abs=1e-9)  # i x 0.4 / 4 s
    assert all(s.ok for s in res.samples)
