"""The two ways the benchmark sends requests (bench/loops.py): a closed loop of users (at most
`concurrency` in flight, an optional ramp, a count or a duration) and an open-loop schedule sent
whatever the server does; both end early through a `Stopper`. The fake OpenAI server runs on an
httpx.MockTransport and a VirtualClock, so every send time is exactly the schedule's."""

from __future__ import annotations

import httpx
import pytest

from kvtune.bench.loops import OPEN_LEAD_S, Stopper, closed_loop, open_loop, ramp_offset, span
from kvtune.bench.server_timing import max_concurrency
from kvtune.bench.stream import CHAT_PATH, build_body
from kvtune.objectives.metrics import RequestSample
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload

W = Workload(output_tokens=4)


def body(i: int) -> dict:
    return build_body("m", f"prompt {i}", W, None)


def closed(fake: MockOpenAI, **kw) -> tuple[list[RequestSample], float, float]:
    """Run a closed loop on `fake`; also returns its start time."""

    async def main():
        start = fake.clock.monotonic()
        async with httpx.AsyncClient(transport=fake.transport()) as client:
            samples, took = await closed_loop(client, fake.base_url + CHAT_PATH, body, clock=fake.clock, **kw)
        return samples, took, start

    return fake.clock.run(main())


def test_a_closed_loop_keeps_its_users_busy_and_never_more_in_flight():
    samples, took, _ = closed(MockOpenAI(ttft_s=0.1, itl_s=0.01), count=6, concurrency=2, timeout_s=10.0)
    assert len(samples) == 6 and all(s.ok for s in samples)
    assert max_concurrency(samples) == 2
    one = samples[0].end_time - samples[0].send_time
    assert took == pytest.approx(3 * one)  # three rounds of two users back to back
    assert took == span(samples)


def test_a_closed_loop_never_starts_more_users_than_requests():
    samples, _, _ = closed(MockOpenAI(ttft_s=0.1, itl_s=0.01), count=2, concurrency=8, timeout_s=10.0)
    assert len(samples) == 2 and max_concurrency(samples) == 2


def test_users_ramp_in_over_ramp_s_then_send_at_once():
    samples, _, start = closed(MockOpenAI(ttft_s=0.5, itl_s=0.01), count=8, concurrency=4, timeout_s=10.0, ramp_s=1.0)
    sends = [s.send_time - start for s in samples]  # in request order
    assert sends[:4] == pytest.approx([0.0, 0.25, 0.5, 0.75])  # the users' first requests ramp in
    answer = samples[0].end_time - samples[0].send_time
    assert sends[4] == pytest.approx(answer)  # user 0's next goes as soon as it is free
    assert samples[4].queue_wait_s == pytest.approx(answer)  # due at the start, as without a ramp


def test_a_timed_closed_loop_sends_nothing_after_its_duration():
    samples, _, start = closed(
        MockOpenAI(ttft_s=0.2, itl_s=0.01), count=None, concurrency=2, timeout_s=10.0, duration_s=1.0
    )
    assert samples and all(s.send_time < start + 1.0 for s in samples)
    assert max(s.end_time for s in samples) > start + 1.0 - 1e-9  # the last round finishes


def test_a_stop_cancels_what_is_in_flight_and_keeps_exactly_the_samples_heard():
    heard: list[RequestSample] = []

    def stop_when(s: RequestSample) -> str | None:
        heard.append(s)
        return "enough" if len(heard) == 3 else None

    stopper = Stopper(stop_when)
    samples, _, _ = closed(MockOpenAI(ttft_s=0.1, itl_s=0.01), count=40, concurrency=4, timeout_s=10.0, stopper=stopper)
    assert stopper.reason == "enough"
    assert sorted(map(id, samples)) == sorted(map(id, heard)) and len(samples) == 3
    assert 3 < stopper.sent <= 3 + 4  # the users' requests in flight at the stop were sent


def test_an_open_loop_sends_on_its_schedule_whatever_the_server_does():
    fake = MockOpenAI(ttft_s=2.0, itl_s=0.01)  # each answer takes longer than the gaps
    offsets = [0.0, 0.5, 1.0, 1.5]

    async def main():
        start = fake.clock.monotonic()
        async with httpx.AsyncClient(transport=fake.transport()) as client:
            bodies = [body(i) for i in range(len(offsets))]
            samples, took = await open_loop(client, fake.base_url + CHAT_PATH, bodies, offsets, 10.0, clock=fake.clock)
        return samples, took, start

    samples, took, start = fake.clock.run(main())
    assert [s.send_time - start for s in samples] == pytest.approx([OPEN_LEAD_S + o for o in offsets])
    assert all(s.schedule_lag_s == pytest.approx(0.0) for s in samples)  # none sent late
    assert max_concurrency(samples) == 4 and took == span(samples)


def test_an_open_loop_sends_nothing_after_a_stop():
    fake = MockOpenAI(ttft_s=0.05, itl_s=0.01)
    stopper = Stopper(lambda s: "stop")  # the first answer stops the run
    offsets = [0.0, 1.0, 2.0, 3.0]

    async def main():
        async with httpx.AsyncClient(transport=fake.transport()) as client:
            bodies = [body(i) for i in range(len(offsets))]
            return await open_loop(
                client, fake.base_url + CHAT_PATH, bodies, offsets, 10.0, stopper=stopper, clock=fake.clock
            )

    samples, _ = fake.clock.run(main())
    assert len(samples) == 1 and stopper.sent == 1 and stopper.reason == "stop"


def test_ramp_offset_spreads_only_the_first_round():
    assert [ramp_offset(i, 4, 2.0) for i in range(6)] == [0.0, 0.5, 1.0, 1.5, 0.0, 0.0]
    assert ramp_offset(1, 1, 2.0) == 0.0 and ramp_offset(1, 4, 0.0) == 0.0


def test_span_runs_from_the_first_send_to_the_last_end():
    a = RequestSample(send_time=1.0, end_time=3.0)
    b = RequestSample(send_time=2.0, end_time=5.5)
    unfinished = RequestSample(send_time=6.0)
    assert span([a, b]) == 4.5 and span([a, unfinished]) == 5.0 and span([]) == 0.0


def test_a_stopper_without_a_rule_keeps_everything():
    s = Stopper(None)
    assert s.keep(RequestSample(send_time=0.0)) and s.reason is None
