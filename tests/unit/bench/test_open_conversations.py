"""Conversations that arrive open-loop, and think times drawn per turn (issue 30 item 4), against
the fake server on virtual time (MockOpenAI, VirtualClock): with ``mode="open"`` conversation c's
first turn goes out at the arrival schedule's offset c whatever the server does, each
conversation then runs its turns with the history; a drawn pause is exactly `think_pause`'s."""

from __future__ import annotations

import statistics

import pytest

from kvtune.bench.arrivals import arrival_offsets, arrival_offsets_for
from kvtune.bench.client import BenchOptions, BenchRun, run
from kvtune.bench.lengths import think_pause
from kvtune.bench.multiturn import conversation_starts, planned_turns
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload
from kvtune.workload.lognormal import lognormal_p99

EXACT = 1e-9


def _wl(**kw: object) -> Workload:
    base: dict[str, object] = dict(
        multiturn=True, turns=3, concurrency=2, prompt_tokens=20, output_tokens=4, num_requests=12, warmup_requests=0
    )
    base.update(kw)
    return Workload(**base).validate()  # type: ignore[arg-type]


def _on(fake: MockOpenAI, wl: Workload, **options: object) -> BenchRun:
    return run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock, **options))  # type: ignore[arg-type]


def _firsts(res: BenchRun) -> list[float]:
    """Each conversation's first-turn send, from the first one's intended start."""
    firsts = sorted((s for s in res.samples if s.turn == 1), key=lambda s: s.conversation or 0)
    t0 = firsts[0].intended_send_time
    assert t0 is not None
    return [s.send_time - t0 for s in firsts]


def test_conversations_start_on_the_arrival_schedule_whatever_the_server_does() -> None:
    """A slow server (1 s a turn) and 2 users' worth of concurrency: all 4 conversations still
    start at the schedule's times, so more than 2 run at once; each still runs all its turns."""
    wl = _wl(mode="open", rate=4.0, seed=3)
    res = _on(MockOpenAI(ttft_s=1.0, itl_s=0.01), wl)
    assert res.mode == "open" and not res.fell_behind
    assert _firsts(res) == pytest.approx(arrival_offsets(4, 4.0, "poisson", seed=3), abs=EXACT)
    assert [(s.conversation, s.turn) for s in res.samples] == [(c, k) for c in range(4) for k in (1, 2, 3)]
    assert all(s.ok for s in res.samples) and res.metrics["max_concurrent_requests"] > 2
    assert res.metrics["offered_rate"] == 4.0 and res.metrics["p99_schedule_lag_ms"] == pytest.approx(0, abs=1e-6)
    later = [s for s in res.samples if s.turn != 1]
    assert all(s.intended_send_time is None for s in later)  # only a start has a due time


def test_each_open_conversation_carries_its_history_and_thinks_between_turns() -> None:
    fake = MockOpenAI(ttft_s=0.05, itl_s=0.01)
    res = _on(fake, _wl(mode="open", rate=1.0, arrival="constant", think_time_s=2.0, num_requests=6))
    assert _firsts(res) == pytest.approx([0.0, 1.0], abs=EXACT)
    for c in (0, 1):
        turns = [s for s in res.samples if s.conversation == c]
        for a, b in zip(turns, turns[1:]):
            assert a.end_time is not None and b.send_time - a.end_time == pytest.approx(2.0, abs=EXACT)
    assert sorted(len(b["messages"]) for b in fake.received) == [1, 1, 3, 3, 5, 5]


def test_a_duration_starts_every_conversation_its_window_holds() -> None:
    wl = _wl(mode="open", rate=2.0, duration_s=3.0, seed=1, turns=2)
    starts = arrival_offsets_for(3.0, 2.0, "poisson", seed=1)
    assert conversation_starts(wl) == starts and planned_turns(wl) == 2 * len(starts)
    res = _on(MockOpenAI(ttft_s=0.05, itl_s=0.01), wl)
    assert res.metrics["conversations"] == len(starts) and res.planned == 2 * len(starts)
    assert _firsts(res) == pytest.approx(starts, abs=EXACT)


def test_a_stop_ends_the_starts_too() -> None:
    """Once `stop_when` gives a reason nothing more is sent: no turn, no new conversation."""
    seen: list[int] = []

    def stop_when(sample: object) -> str | None:
        seen.append(1)
        return "enough" if len(seen) == 3 else None

    res = _on(MockOpenAI(ttft_s=0.3, itl_s=0.01), _wl(mode="open", rate=10.0, num_requests=30), stop_when=stop_when)
    assert res.stopped == "enough" and len(res.samples) == 3
    assert res.metrics["conversations"] <= 3


def test_warm_up_stays_a_closed_loop_of_first_turns_sized_by_concurrency() -> None:
    phases: list[str] = []
    res = _on(
        MockOpenAI(ttft_s=0.05, itl_s=0.01), _wl(mode="open", rate=2.0, warmup_requests=2), on_phase=phases.append
    )
    assert phases == ["warmup", "measuring"]
    assert [(s.conversation, s.turn, s.intended_send_time) for s in res.warmup_samples] == [
        (-2, 1, None),
        (-1, 1, None),
    ]


def test_a_drawn_pause_is_seeded_by_the_seed_conversation_and_turn_alone() -> None:
    w = _wl(think_time_s=2.0, think_spread=0.5, seed=7)
    draws = [think_pause(w, c, k) for c in range(200) for k in (2, 3)]
    assert draws == [think_pause(w, c, k) for c in range(200) for k in (2, 3)]  # the same, asked again
    assert think_pause(w, 0, 2) != think_pause(w, 0, 3) != think_pause(w, 1, 2)
    assert think_pause(_wl(think_time_s=2.0, think_spread=0.5, seed=8), 0, 2) != think_pause(w, 0, 2)
    assert 1.7 < statistics.mean(draws) < 2.1  # mean think_time_s, a little below: the p99 clamp
    p99 = lognormal_p99(2.0, 0.5)
    assert max(draws) == p99 and min(draws) > 0  # the rare long pause is clamped to the p99
    assert {think_pause(_wl(think_time_s=2.0), c, 2) for c in range(10)} == {2.0}  # spread 0: constant


def test_the_client_waits_exactly_each_drawn_pause() -> None:
    wl = _wl(concurrency=1, num_requests=6, think_time_s=1.0, think_spread=0.8, seed=5)
    res = _on(MockOpenAI(ttft_s=0.05, itl_s=0.01), wl)
    for c in (0, 1):
        turns = [s for s in res.samples if s.conversation == c]
        for a, b in zip(turns, turns[1:]):
            assert a.end_time is not None and b.turn is not None
            assert b.send_time - a.end_time == pytest.approx(think_pause(wl, c, b.turn), abs=EXACT)
    gaps = {round(think_pause(wl, c, k), 6) for c in (0, 1) for k in (2, 3)}
    assert len(gaps) == 4  # drawn: four different pauses
