"""Multi-turn conversations against a real llama-server: the prompt cache makes later turns fast.

One server (the demo model, one slot of 4096 tokens, ``--cache-reuse 256``), two runs of the
same conversations' shape: with the request's ``cache_prompt: false`` (what `kvtune run` sends
for synthetic prompts) every turn re-processes the whole history; with ``cache_prompt: true``
(what it sends for multi-turn workloads) the slot keeps the conversation and a later turn
processes only its new 300 tokens. Long history, tiny answers: turn 3 re-sends ~630 tokens of
history for 300 new ones, so without the cache a later turn's prefill is 2-3x longer, well past
what the machine's other load moves (seen under a CPU hog: later-turn TTFT ratio 0.41 cached to
uncached with four turns of 400). The test asserts the direction (later turns faster with
the cache), that without it later turns are slower than first ones (they re-process the
history), and that the server's own count (timings.cache_n) gives a hit rate above zero
only with the cache on. Under a minute on an idle 2-core machine (~3,800 prompt tokens to prefill).
"""

from __future__ import annotations

import math

import pytest

from kvtune.bench.client import BenchOptions, run
from kvtune.errors import KvtuneError
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.launchers.models import demo_model_path
from kvtune.launchers.process import ServerProcess, free_port
from kvtune.workload import Workload
from tests.e2e.conftest import demo_llama_server

pytestmark = pytest.mark.e2e
WL = Workload(
    multiturn=True,
    turns=3,
    prompt_tokens=300,
    output_tokens=4,
    concurrency=1,
    num_requests=6,  # two conversations of three turns
    warmup_requests=1,
    request_timeout_s=120,
)


def test_prompt_cache_makes_later_turns_faster(tmp_path, llama_server: str) -> None:
    try:
        model = demo_model_path()
    except KvtuneError as e:
        pytest.skip(str(e))
    launcher = LlamaServerLauncher(binary=llama_server, model_path=str(model))
    port = free_port()
    cand = Candidate(flags={"parallel": 1, "ctx-per-slot": 4096, "threads": 2, "cache-reuse": 256})
    proc = ServerProcess(
        argv=launcher.command(cand, port), env=launcher.environment(cand), log_path=tmp_path / "server.log", port=port
    )
    proc.start()
    try:
        proc.wait_ready(180)
        runs = {
            cache: run(
                proc.base_url,
                WL,
                BenchOptions(launcher.served_model_name(), extra_body={"cache_prompt": cache}, tokenizer=str(model)),
            )
            for cache in (False, True)
        }
    finally:
        proc.stop()
    for r in runs.values():
        assert [s.error for s in r.samples if not s.ok] == []
        assert [(s.conversation, s.turn) for s in r.samples] == [(c, k) for c in (0, 1) for k in (1, 2, 3)]
        # each turn carried the history: the server counted more prompt tokens turn by turn
        for c in (0, 1):
            counted = [s.prompt_tokens for s in r.samples if s.conversation == c]
            assert all(b >= a + 300 for a, b in zip(counted, counted[1:])), counted
    off, on = runs[False].metrics, runs[True].metrics
    ratio = on["median_ttft_ms_later"] / off["median_ttft_ms_later"]
    print(f"later-turn TTFT median: {on['median_ttft_ms_later']:.0f} ms cached, "
          f"{off['median_ttft_ms_later']:.0f} ms uncached (ratio {ratio:.2f}); "
          f"turn 1: {on['median_ttft_ms_turn1']:.0f} / {off['median_ttft_ms_turn1']:.0f} ms; "
          f"hit rate {on['prefix_cache_hit_rate']:.2f} / {off['prefix_cache_hit_rate']:.2f}")  # fmt: skip
    assert on["median_ttft_ms_later"] < off["median_ttft_ms_later"]
    # without the cache later turns re-process the history, so they are slower than first turns
    assert off["median_ttft_ms_later"] > off["median_ttft_ms_turn1"]
    assert off["prefix_cache_hit_rate"] == 0.0
    assert not math.isnan(on["prefix_cache_hit_rate"]) and on["prefix_cache_hit_rate"] > 0.3


def test_conversations_arrive_open_loop_with_drawn_think_times(tmp_path, llama_server: str) -> None:
    """Sessions that arrive (issue 30 item 4): 4 conversations of 2 turns start at 2 per second
    (constant gaps of 0.5 s), whatever the server is doing, each pausing a drawn think time
    (mean 0.3 s, sigma 0.5) before its second turn; against a real llama-server every turn is
    answered, each conversation's second turn carries its first (the server counts more prompt
    tokens), and each first turn carries its intended start (the schedule) and its recorded lag."""
    wl = Workload(
        multiturn=True,
        turns=2,
        prompt_tokens=40,
        output_tokens=4,
        concurrency=1,
        num_requests=8,  # four conversations of two turns
        warmup_requests=1,
        mode="open",
        rate=2.0,
        arrival="constant",
        think_time_s=0.3,
        think_spread=0.5,
        request_timeout_s=120,
    )
    flags = {"parallel": 4, "ctx-per-slot": 1024, "threads": 2}
    with demo_llama_server(llama_server, flags, tmp_path / "server.log") as (proc, launcher, model):
        r = run(proc.base_url, wl, BenchOptions(launcher.served_model_name(), tokenizer=str(model)))
    assert [s.error for s in r.samples if not s.ok] == []
    assert sorted((s.conversation, s.turn) for s in r.samples) == [(c, k) for c in range(4) for k in (1, 2)]
    for c in range(4):
        first, second = sorted((s for s in r.samples if s.conversation == c), key=lambda s: s.turn)
        assert second.prompt_tokens > first.prompt_tokens + 40  # the history came along
        assert second.send_time - first.send_time >= first.e2el_s  # it waited for the answer, then thought
    starts = sorted((s for s in r.samples if s.turn == 1), key=lambda s: s.conversation)
    assert all(s.intended_send_time is not None for s in starts)
    gaps = [b.intended_send_time - a.intended_send_time for a, b in zip(starts, starts[1:])]
    assert all(abs(g - 0.5) < 1e-6 for g in gaps), gaps  # the schedule: 2 conversations per second
    assert all(s.schedule_lag_s is not None for s in starts)  # recorded; no bound (machine-dependent)


def test_conversations_of_a_group_share_their_system_prompt_in_the_servers_cache(tmp_path, llama_server: str) -> None:
    """System prompts shared by subsets of users (issue 30 item 4), against a real llama-server
    with one slot: every conversation opens with a 200-token system prompt; when all share one
    (fraction 1), each conversation's first turn finds it in the slot the previous conversation
    left (the server's own timings.cache_n covers it); when each has its own (fraction 0 of the
    same length), a first turn finds only the chat template's opening tokens."""

    def wl(fraction: float) -> Workload:
        return Workload(
            multiturn=True,
            turns=2,
            prompt_tokens=30,
            output_tokens=4,
            concurrency=1,
            num_requests=6,  # three conversations of two turns
            warmup_requests=1,
            shared_prefix_fraction=fraction,
            shared_prefix_tokens=200,
            request_timeout_s=120,
        )

    flags = {"parallel": 1, "ctx-per-slot": 2048, "threads": 2}
    with demo_llama_server(llama_server, flags, tmp_path / "server.log") as (proc, launcher, model):
        options = BenchOptions(launcher.served_model_name(), tokenizer=str(model), extra_body={"cache_prompt": True})
        shared = run(proc.base_url, wl(1.0), options)
        unique = run(proc.base_url, wl(1e-9), options)  # a fraction > 0 that no conversation reaches
    for r in (shared, unique):
        assert [s.error for s in r.samples if not s.ok] == []
        assert all(s.prompt_tokens >= 230 for s in r.samples)  # both carry a 200-token system prompt
    first = [s.server_timings["cache_n"] for s in shared.samples if s.turn == 1 and s.server_timings]
    alone = [s.server_timings["cache_n"] for s in unique.samples if s.turn == 1 and s.server_timings]
    assert len(first) == len(alone) == 3
    assert all(n >= 200 for n in first), first  # the shared system prompt came from the cache
    assert all(n < 50 for n in alone), alone  # only the template's opening tokens
