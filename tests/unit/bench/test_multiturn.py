"""Multi-turn conversations against the fake server on virtual time (MockOpenAI, VirtualClock).

The fake's prefix cache and prefill cost per prompt word make a prompt cache's effect exact:
with the cache a later turn costs only its new words, without it the whole history, so the
tests check the client's per-turn figures to the microsecond on any machine's load.
"""

from __future__ import annotations

import math

import pytest

from kvtune.bench.client import BenchOptions, BenchRun, run
from kvtune.bench.multiturn import turn_metrics
from kvtune.objectives.metrics import RequestSample
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload

EXACT = 1e-9
TTFT_S, ITL_S, PREFILL_S = 0.05, 0.01, 0.001  # the fake's: first token, gap, per uncached word


def _wl(**kw: object) -> Workload:
    base: dict[str, object] = dict(
        multiturn=True, turns=3, concurrency=2, prompt_tokens=100, output_tokens=4, num_requests=12, warmup_requests=0
    )
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _on(fake: MockOpenAI, wl: Workload, **options: object) -> BenchRun:
    return run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock, **options))  # type: ignore[arg-type]


def _fake(**kw: object) -> MockOpenAI:
    return MockOpenAI(ttft_s=TTFT_S, itl_s=ITL_S, prefill_s_per_token=PREFILL_S, prefix_cache=True, **kw)  # type: ignore[arg-type]


def test_each_turn_carries_the_history_with_the_servers_own_answers() -> None:
    fake = _fake()
    res = _on(fake, _wl(concurrency=1, num_requests=3))
    assert [(s.conversation, s.turn) for s in res.samples] == [(0, 1), (0, 2), (0, 3)]
    roles = [[m["role"] for m in body["messages"]] for body in fake.received]
    assert roles == [["user"], ["user", "assistant", "user"], ["user", "assistant", "user", "assistant", "user"]]
    last = fake.received[-1]["messages"]
    assert last[0] == fake.received[0]["messages"][0] and last[2] == fake.received[1]["messages"][2]
    assert last[1]["content"] == last[3]["content"] == " tok" * 4  # what the fake answered, not the dataset's
    assert all(body["max_tokens"] == 4 and body["ignore_eos"] for body in fake.received)


def test_only_a_conversations_first_turn_is_new_to_the_cache() -> None:
    """Later turns share their history as a prefix; two conversations share nothing."""
    fake = _fake()
    res = _on(fake, _wl(concurrency=1, num_requests=6))
    cached = [s.server_timings["cache_n"] for s in res.samples if s.server_timings]
    # turn 1 of conversation 1 shares nothing with conversation 0 (its nonce comes first)
    assert cached[0] == 0 and cached[3] == 0
    # a later turn finds its whole history (every word sent before it in the conversation)
    words = [sum(len(str(m["content"]).split()) for m in b["messages"][:-1]) for b in fake.received]
    assert cached[1:3] == words[1:3] and cached[4:6] == words[4:6]


def test_the_cache_changes_later_turns_ttft_by_the_history_the_fake_re_processes() -> None:
    on = _on(_fake(), _wl(concurrency=1, num_requests=3), extra_body={"cache_prompt": True})
    off = _on(_fake(), _wl(concurrency=1, num_requests=3), extra_body={"cache_prompt": False})
    for r in (on, off):  # TTFT is the fake's first-token delay plus its prefill of uncached words
        for s in r.samples:
            assert s.server_timings is not None
            assert abs(s.ttft_s - (TTFT_S + PREFILL_S * s.server_timings["prompt_n"])) < EXACT  # type: ignore[operator]
    assert on.metrics["median_ttft_ms_turn1"] == pytest.approx(off.metrics["median_ttft_ms_turn1"], abs=EXACT)
    assert on.metrics["median_ttft_ms_later"] < off.metrics["median_ttft_ms_later"]
    assert off.metrics["prefix_cache_hit_rate"] == 0.0
    hits = sum(s.server_timings["cache_n"] for s in on.samples)  # type: ignore[index]
    looked_up = sum(s.server_timings["cache_n"] + s.server_timings["prompt_n"] for s in on.samples)  # type: ignore[index]
    assert on.metrics["prefix_cache_hit_rate"] == pytest.approx(hits / looked_up) and hits > 0


def test_each_user_holds_one_conversation_at_a_time_and_thinks_between_turns() -> None:
    fake = _fake()
    res = _on(fake, _wl(concurrency=2, num_requests=12, think_time_s=2.0))
    assert res.metrics["conversations"] == 4 and res.metrics["num_requests"] == 12
    assert res.metrics["max_concurrent_requests"] <= 2
    for c in range(4):
        turns = [s for s in res.samples if s.conversation == c]
        assert [s.turn for s in turns] == [1, 2, 3]
        for a, b in zip(turns, turns[1:]):  # the next turn goes out think_time after the answer
            assert a.end_time is not None and abs(b.send_time - a.end_time - 2.0) < EXACT


def test_a_conversation_ends_when_its_next_turn_would_not_fit_the_context() -> None:
    # one turn: ~100 words + 4 output + 12 template; two fit in 300 with the 32 of the template
    res = _on(_fake(), _wl(concurrency=1, num_requests=6, conversation_max_tokens=300))
    assert [(s.conversation, s.turn) for s in res.samples] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert res.metrics["conversations_cut_by_context"] == 2
    assert any("ended early: the next turn would not fit the context" in n for n in res.notes)


def test_a_failed_turn_ends_its_conversation() -> None:
    fake = _fake(crash_after_requests=2)
    res = _on(fake, _wl(concurrency=1, num_requests=6))
    assert [(s.conversation, s.turn, s.ok) for s in res.samples] == [
        (0, 1, True), (0, 2, True), (0, 3, False), (1, 1, False),
    ]  # fmt: skip
    assert res.metrics["median_ttft_ms_later"] == math.inf  # a failed later turn counts as +inf


def test_warm_up_sends_first_turns_of_conversations_the_measured_phase_never_uses() -> None:
    fake = _fake()
    phases: list[str] = []
    res = _on(fake, _wl(concurrency=1, num_requests=3, warmup_requests=2), on_phase=phases.append)
    assert phases == ["warmup", "measuring"]
    assert [(s.conversation, s.turn) for s in res.warmup_samples] == [(-2, 1), (-1, 1)]
    assert res.samples[0].server_timings is not None and res.samples[0].server_timings["cache_n"] == 0


def test_turn_metrics_split_first_turns_from_later_ones() -> None:
    def turn(c: int, k: int, ttft: float, ok: bool = True) -> RequestSample:
        return RequestSample(send_time=0.0, ok=ok, ttft_s=ttft if ok else None, conversation=c, turn=k)

    m = turn_metrics([turn(0, 1, 0.4), turn(0, 2, 0.1), turn(0, 3, 0.3), turn(1, 1, 0.6), turn(1, 2, 0.2)])
    assert m["median_ttft_ms_turn1"] == pytest.approx(500.0) and m["mean_ttft_ms_later"] == pytest.approx(200.0)
    assert (m["requests_turn1"], m["requests_later"], m["conversations"]) == (2, 3, 2)
    assert m["mean_turns_per_conversation"] == 2.5
    assert turn_metrics([RequestSample(send_time=0.0, ok=True, ttft_s=0.1)]) == {}  # single-turn runs: none


def test_the_bench_table_shows_the_conversations_and_ttft_per_turn() -> None:
    from kvtune.bench.results_format import metrics_table

    res = _on(_fake(), _wl(concurrency=2, num_requests=12))
    rows = dict(metrics_table(res.metrics))
    assert rows["Multi-turn conversations"] == ""  # a section header
    assert rows["Conversations"] == "4" and rows["Mean turns per conversation"] == "3"
    assert rows["Ended early: context full"] == "0"
    for label, key in (
        ("Median TTFT turn 1 (ms)", "median_ttft_ms_turn1"),
        ("P90 TTFT later turns (ms)", "p90_ttft_ms_later"),
    ):
        assert float(rows[label]) == pytest.approx(res.metrics[key], abs=0.005)
    single = dict(metrics_table(_on(_fake(), Workload(num_requests=2, warmup_requests=0)).metrics))
    assert "Conversations" not in single and "Median TTFT turn 1 (ms)" not in single
