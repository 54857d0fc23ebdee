"""A trace's slot sized from the trace before any launch (bench/trace_sizing.py): the p99 of
prompt + output, the template allowance on top, the model's context as the bound, the share
clipped (whole hash-id blocks), the prefix reuse before -> after, and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.bench.trace_sizing import hash_reuse, percentile_tokens, size_trace, sized_workload
from kvtune.bench.traces import TraceRequest, fitted_trace
from kvtune.errors import SpecError
from kvtune.launchers.llama_server import slot_context_choices
from kvtune.launchers.vllm.values import max_len_choices
from kvtune.workload import REQUEST_TEMPLATE_TOKENS, Workload

# Four requests, Mooncake's 512-token blocks: r1 shares r0's two blocks, r2 shares r1's three
# (and is 3010 tokens long), r3 shares nothing.
MOONCAKE = (
    '{"timestamp": 0, "input_length": 1024, "output_length": 100, "hash_ids": [1, 2]}\n'
    '{"timestamp": 1000, "input_length": 1536, "output_length": 50, "hash_ids": [1, 2, 3]}\n'
    '{"timestamp": 2000, "input_length": 3000, "output_length": 10, "hash_ids": [1, 2, 3, 4, 5, 6]}\n'
    '{"timestamp": 3000, "input_length": 500, "output_length": 20, "hash_ids": [7]}\n'
)
CHAT = REQUEST_TEMPLATE_TOKENS["chat"]


@pytest.fixture
def moon(tmp_path: Path) -> str:
    f = tmp_path / "m.jsonl"
    f.write_text(MOONCAKE)
    return str(f)


def test_nearest_rank_p99_is_a_length_some_request_has() -> None:
    reqs = tuple(TraceRequest(0.0, n, 0) for n in range(200, 0, -1))  # totals 1..200, unordered
    assert percentile_tokens(reqs) == 198  # rank ceil(0.99 * 200) = 198
    assert percentile_tokens(reqs[:10]) == 200  # with few requests the p99 is the longest


def test_the_model_bounds_the_clip_and_whole_blocks_are_kept(moon: str) -> None:
    s = size_trace(Workload(trace=moon), model_context=2048 + CHAT)
    assert (s.p99_tokens, s.max_tokens, s.context_tokens) == (3010, 2048, 2048 + CHAT)
    assert s.replayed.clipped == 1
    # r2 keeps its output (10) and the whole blocks that fit the 2038 left: three, 1536 tokens
    assert [(r.input_tokens, r.output_tokens) for r in s.replayed.requests] == [
        (1024, 100),
        (1536, 50),
        (1536, 10),
        (500, 20),
    ]
    # reuse: 1024 + 1536 shared tokens of 6060 before; after, the same shared tokens of 4596
    # (r2's unshared tail is what the clip took)
    assert s.reuse_before == pytest.approx(2560 / 6060)
    assert s.reuse_after == pytest.approx(2560 / 4596)
    assert s.describe() == (
        f"m (mooncake, timestamps in ms): 4 requests over 3 s; slot {2048 + CHAT} tokens = clip 2048 "
        f"(p99 of prompt + output 3010, bounded by the model's {2048 + CHAT}-token context) + {CHAT} "
        "template tokens; 1 of 4 (25%) clipped at whole 512-token blocks, 0 rows skipped; "
        "prefix reuse 42.2% -> 55.7% of prompt tokens"
    )


def test_the_load_hint_says_what_the_replay_asks(moon: str) -> None:
    s = size_trace(Workload(trace=moon), model_context=2048 + CHAT)
    assert s.load_hint().startswith("the trace's 4 requests bring 4596 prompt and 180 output tokens within 3 s")


def test_an_unbounded_p99_clips_nothing_of_a_short_trace(moon: str) -> None:
    s = size_trace(Workload(trace=moon), model_context=None)
    assert (s.max_tokens, s.replayed.clipped, s.reuse_before, s.reuse_after) == (3010, 0, s.reuse_after, s.reuse_before)
    assert "bounded" not in s.describe()


def test_the_users_clip_is_kept_and_checked_against_the_model(moon: str) -> None:
    s = size_trace(Workload(trace=moon, trace_max_tokens=600), model_context=4096)
    assert (s.max_tokens, s.explicit, s.replayed.clipped) == (600, True, 3)
    assert "clip 600 (workload.trace_max_tokens)" in s.describe()
    with pytest.raises(
        SpecError, match=f"exceeds the model's 2048-token context: give workload.trace_max_tokens {2048 - CHAT}"
    ):
        size_trace(Workload(trace=moon, trace_max_tokens=2040), model_context=2048)


def test_a_trace_no_request_of_which_fits_the_model_is_refused(moon: str) -> None:
    with pytest.raises(SpecError, match="cannot fit the model: its shortest request is 520 tokens"):
        size_trace(Workload(trace=moon), model_context=400)
    with pytest.raises(SpecError, match="cannot hold a request"):
        size_trace(Workload(trace=moon), model_context=CHAT + 1)
    # a completion's allowance is the BOS token: 521 fits a 521-token model
    assert size_trace(Workload(trace=moon, endpoint="completions"), model_context=521).max_tokens == 520


def test_skipped_rows_are_counted_in_the_line(tmp_path: Path) -> None:
    f = tmp_path / "b.csv"
    f.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "0,ChatGPT,100,10,110,Conversation log\n1,ChatGPT,100,0,100,Conversation log\n2,GPT-4,50,5,55,API log\n"
    )
    s = size_trace(Workload(trace=str(f), trace_model="ChatGPT"), model_context=None)
    assert len(s.replayed.requests) == 1
    assert "2 rows skipped (1 no response (a failed request in the log); 1 Model is not ChatGPT)" in s.describe()
    assert "prefix reuse" not in s.describe()  # no hash ids: nothing to say


def test_the_sizing_reaches_every_slot_size(moon: str) -> None:
    """The clip lands in the workload; its request length (clip + template) sizes llama-server's
    per-slot context and vLLM's max-model-len, within the model's context."""
    w, s = sized_workload(Workload(trace=moon), model_context=2048 + CHAT)
    assert s is not None and w.trace_max_tokens == 2048 and w.request_tokens == 2048 + CHAT
    assert slot_context_choices(w, 2048 + CHAT) == (2048 + CHAT,)  # 2304 would pass the model
    assert slot_context_choices(w, 8192) == (2304, 4608)
    assert max_len_choices(w, 2048 + CHAT) == (2048 + CHAT,)
    assert fitted_trace(w).requests == s.replayed.requests  # the run replays what was sized
    assert sized_workload(Workload(), 2048) == (Workload(), None)


def test_a_trials_requests_default_to_num_requests(moon: str) -> None:
    assert len(fitted_trace(Workload(trace="mooncake-conv")).requests) == 32
    assert len(fitted_trace(Workload(trace="mooncake-conv", num_requests=5)).requests) == 5
    assert len(fitted_trace(Workload(trace="mooncake-conv", trace_window_s=3.5)).requests) == 26  # its first 3.5 s
    assert len(size_trace(Workload(trace=moon, num_requests=2), None).replayed.requests) == 2


def test_shipped_mooncake_on_the_demo_models_context() -> None:
    """The issue's case: the first 32 requests, an 8192-token model. Half are longer than the
    model holds, and the clip, not the 264-token guess, sizes the slot."""
    s = size_trace(Workload(trace="mooncake-conv"), model_context=8192)
    totals = [r.input_tokens + r.output_tokens for r in fitted_trace(Workload(trace="mooncake-conv")).requests]
    assert s.max_tokens == 8192 - CHAT
    assert s.replayed.clipped == sum(t > 8192 - CHAT for t in totals) == 16
    assert all(r.input_tokens + r.output_tokens <= s.max_tokens for r in s.replayed.requests)
    assert s.reuse_before is not None and s.reuse_after is not None and s.reuse_after > s.reuse_before


def test_hash_reuse_counts_only_what_an_earlier_request_held() -> None:
    reqs = (TraceRequest(0, 4, 0, (1,)), TraceRequest(1, 8, 0, (1, 2)))  # blocks of 8: r0 held 4 of block 1
    assert hash_reuse(reqs, 8) == pytest.approx(4 / 12)
    assert hash_reuse((TraceRequest(0, 4, 0),), 8) is None
