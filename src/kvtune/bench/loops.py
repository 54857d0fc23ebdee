"""The two ways the benchmark sends its requests: a closed loop of users, an open-loop schedule.

A closed loop of `concurrency` users sends the next request as soon as a user is free (with an
optional ramp: the users' first requests spread over `ramp_s`). An open loop sends request i at
``start + offsets[i]`` whatever the server is doing (no coordinated omission: arrivals.py fixes
the schedule before the run). Both read and wait on the injected `Clock` only, so a virtual clock
makes their timings exact in tests, and both hand each finished measured request to a `Stopper`,
which ends the phase early once `BenchOptions.stop_when` gives a reason. `fell_behind_schedule`
says when an open loop (of requests, or of conversation starts) could not keep to its schedule.
"""

from __future__ import annotations

import asyncio
import math
from typing import Callable

import httpx

from kvtune.bench.stream import one_request
from kvtune.clock import REAL_CLOCK, Clock
from kvtune.objectives.metrics import RequestSample

# Seconds between creating the open-loop schedule and its first due time.
OPEN_LEAD_S = 0.005
# The open loop fell behind when the p99 send lag exceeds max(50 ms, 10% of the mean gap).
FELL_BEHIND_MIN_S = 0.050
FELL_BEHIND_GAP_FRACTION = 0.10


class Stopper:
    """Hands finished measured requests to `stop_when` and, once it gives a reason, cancels the
    tasks of the phase (requests in flight, the open loop's sender). A sample that finishes after
    the reason is dropped, so the run keeps exactly the samples `stop_when` heard."""

    def __init__(self, stop_when: Callable[[RequestSample], str | None] | None) -> None:
        self.stop_when = stop_when
        self.reason: str | None = None
        self.tasks: list[asyncio.Task] = []
        self.sent = 0  # requests sent in the phase, the ones a stop cancels included

    def keep(self, sample: RequestSample) -> bool:
        """Whether to record `sample`; the one that decides the stop is recorded."""
        if self.reason is not None:
            return False
        if self.stop_when is not None:
            self.reason = self.stop_when(sample)
            if self.reason is not None:
                me = asyncio.current_task()
                for t in self.tasks:
                    if t is not me:
                        t.cancel()
        return True

    async def gather(self) -> None:
        """Wait for the phase's tasks; cancelled ones are the early stop, not an error."""
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                raise r


def span(samples: list[RequestSample]) -> float:
    """First send to last end of a phase."""
    if not samples:
        return 0.0
    return max(s.end_time or s.send_time for s in samples) - min(s.send_time for s in samples)


def ramp_offset(i: int, users: int, ramp_s: float) -> float:
    """Seconds after the phase start that request `i` of a closed loop of `users` is due: the
    first `users` requests spread evenly over `ramp_s`, every later one at once."""
    if ramp_s <= 0 or users <= 1 or i >= users:
        return 0.0
    return ramp_s * i / users


async def closed_loop(
    client: httpx.AsyncClient,
    url: str,
    body: Callable[[int], dict],
    count: int | None,
    concurrency: int,
    timeout_s: float,
    duration_s: float | None = None,
    secret: str | None = None,
    ramp_s: float = 0.0,
    stopper: Stopper | None = None,
    clock: Clock = REAL_CLOCK,
) -> tuple[list[RequestSample], float]:
    """`concurrency` workers take requests 0, 1, ... in order until `count` are taken or
    `duration_s` has passed since the start (or `stopper` stops the run); returns samples and
    first-send..last-end. With `ramp_s` the first request of each worker is due
    ``i * ramp_s / workers`` after the start (users ramp in); later requests are due at the
    start, as without a ramp."""
    samples: dict[int, RequestSample] = {}
    next_index = 0
    start = clock.monotonic()
    deadline = math.inf if duration_s is None else start + duration_s
    n_workers = concurrency if count is None else min(concurrency, count)
    stop = stopper or Stopper(None)

    async def worker() -> None:
        nonlocal next_index
        while (count is None or next_index < count) and clock.monotonic() < deadline and stop.reason is None:
            i = next_index
            next_index += 1
            due = start + ramp_offset(i, n_workers, ramp_s)
            if due > clock.monotonic():
                await clock.asleep(due - clock.monotonic())
            stop.sent += 1
            sample = await one_request(client, url, body(i), timeout_s, due, None, secret, clock)
            if stop.keep(sample):
                samples[i] = sample

    stop.tasks = [asyncio.create_task(worker()) for _ in range(n_workers)]
    await stop.gather()
    done = [samples[i] for i in sorted(samples)]
    return done, span(done)


async def open_loop(
    client: httpx.AsyncClient,
    url: str,
    bodies: list[dict],
    offsets: list[float],
    timeout_s: float,
    secret: str | None = None,
    stopper: Stopper | None = None,
    clock: Clock = REAL_CLOCK,
) -> tuple[list[RequestSample], float]:
    """Send request i at ``start + offsets[i]`` whatever the earlier ones are doing; a request
    the scheduler reaches late is sent at once (its lag is recorded, nothing is skipped until
    `stopper` stops the run: then nothing more is sent)."""
    start = clock.monotonic() + OPEN_LEAD_S
    stop = stopper or Stopper(None)
    samples: dict[int, RequestSample] = {}

    async def send(i: int, due: float) -> None:
        stop.sent += 1
        sample = await one_request(client, url, bodies[i], timeout_s, due, due, secret, clock)
        if stop.keep(sample):
            samples[i] = sample

    async def sender() -> None:
        for i, off in enumerate(offsets):
            due = start + off
            delay = due - clock.monotonic()
            if delay > 0:
                await clock.asleep(delay)
            stop.tasks.append(asyncio.create_task(send(i, due)))

    stop.tasks.append(asyncio.create_task(sender()))
    # every request is sent (or the stop cancelled the sender) before the waiting starts
    await asyncio.gather(stop.tasks[0], return_exceptions=True)
    await stop.gather()
    done = [samples[i] for i in sorted(samples)]
    return done, span(done)


def fell_behind_schedule(
    rate: float | None, samples: list[RequestSample], metrics: dict[str, float], notes: list[str], unit: str = "req/s"
) -> bool:
    """Whether the open loop could not keep to its schedule (metrics and notes say so too): the
    p99 lag of the sends that had a due time (requests, or conversations' first turns) against
    max(50 ms, 10% of the mean gap). `rate` None (a closed loop): never."""
    if rate is None or not samples:
        return False
    threshold_s = max(FELL_BEHIND_MIN_S, FELL_BEHIND_GAP_FRACTION / rate)
    metrics["schedule_lag_threshold_ms"] = 1000.0 * threshold_s
    metrics["offered_rate"] = rate
    fell_behind = metrics.get("p99_schedule_lag_ms", 0.0) > 1000.0 * threshold_s
    metrics["fell_behind"] = 1.0 if fell_behind else 0.0
    if fell_behind:
        notes.append(
            f"client fell behind its schedule: p99 send lag "
            f"{metrics['p99_schedule_lag_ms']:.0f} ms > {1000 * threshold_s:.0f} ms, so the "
            f"server got less than {rate:g} {unit}; the client (CPU, event loop) may be "
            f"the bottleneck, not the server"
        )
    return fell_behind
