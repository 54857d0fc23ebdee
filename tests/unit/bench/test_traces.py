"""Trace replay: the readers on the shipped excerpts, format detection, fitting (window, count,
speed, length scale, clipping), Mooncake's hash-id blocks as equal token blocks, and the sent
times of a replay on virtual time (MockOpenAI + VirtualClock: exact whatever the machine's load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.bench.client import BenchOptions, run
from kvtune.bench.trace_prompts import TracePromptSource
from kvtune.bench.traces import SHIPPED, TraceFit, fit_trace, fitted_trace, read_trace
from kvtune.errors import SpecError
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload

WORDS = [f"w{i}" for i in range(200)]


def test_shipped_excerpts_read_with_their_formats() -> None:
    formats = {name: read_trace(name) for name in SHIPPED}
    assert {n: t.format for n, t in formats.items()} == {
        "azure-conv": "azure",
        "azure-code": "azure",
        "mooncake-conv": "mooncake",
    }
    for t in formats.values():
        assert len(t.requests) == 300
        times = [r.at_s for r in t.requests]
        assert times[0] == 0.0 and times == sorted(times)
    conv = formats["azure-conv"].requests
    # the file's first rows: 18:15:46.6805900 (374, 44) then 18:15:50.9951690 (396, 109)
    assert (conv[0].input_tokens, conv[0].output_tokens) == (374, 44)
    assert conv[1].at_s == pytest.approx(50.9951690 - 46.6805900, abs=1e-6)
    moon = formats["mooncake-conv"].requests
    assert (moon[0].input_tokens, moon[0].output_tokens, moon[0].hash_ids[:3]) == (6758, 500, (0, 1, 2))
    assert moon[-1].at_s == pytest.approx(102.0)  # ms in the file


def test_format_is_detected_from_content_not_name(tmp_path: Path) -> None:
    burst = tmp_path / "trace.jsonl"  # a CSV whatever the suffix says
    burst.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "7.5,GPT-4,1087,0,1087,Conversation log\n"
        "9,ChatGPT,200,42,242,API log\n"
    )
    t = read_trace(burst)
    assert t.format == "burstgpt"
    # the failed row (no response tokens) is skipped; times count from the first request
    assert [(r.at_s, r.input_tokens, r.output_tokens) for r in t.requests] == [(0.0, 472, 18), (4.0, 200, 42)]
    moon = tmp_path / "moon.csv"
    moon.write_text('{"timestamp": 1500, "input_length": 600, "output_length": 5, "hash_ids": [3, 4]}\n')
    assert read_trace(moon).format == "mooncake"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("a,b,c\n1,2,3\n", "unknown format"),
        ('{"timestamp": 0, "input_length": 5}\n', "lacks output_length"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", "expected a timestamp"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "holds no requests"),
    ],
)
def test_bad_traces_are_one_line_errors(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "t.csv"
    f.write_text(text)
    with pytest.raises(SpecError, match=needle):
        read_trace(f)


def test_missing_trace_names_the_shipped_ones() -> None:
    with pytest.raises(SpecError, match="azure-conv"):
        read_trace("/nonexistent/trace.csv")


def test_fit_window_count_speed_scale_and_clip() -> None:
    trace = read_trace("azure-conv")
    fitted = fit_trace(trace, TraceFit(window_s=10.0, requests=12, speed=4.0, length_scale=0.5, max_tokens=600))
    chosen = [r for r in trace.requests if r.at_s < 10.0][:12]
    assert len(fitted.requests) == 12
    assert fitted.offsets == [r.at_s / 4.0 for r in chosen]
    for orig, got in zip(chosen, fitted.requests):
        want_in, want_out = round(orig.input_tokens * 0.5), round(orig.output_tokens * 0.5)
        if want_in + want_out <= 600:
            assert (got.input_tokens, got.output_tokens) == (want_in, want_out)
        else:  # the prompt is cut first, the output kept
            assert (got.input_tokens, got.output_tokens) == (600 - want_out, want_out)
    assert fitted.clipped == sum(round(r.input_tokens * 0.5) + round(r.output_tokens * 0.5) > 600 for r in chosen)
    assert fitted.clipped > 0  # row 13 of the excerpt (2221 tokens) is in the first 10 s
    assert fitted.describe() == (
        f"replayed 12 requests of azure_conv (azure), first 10 s of the trace, 4x speed, "
        f"lengths scaled by 0.5, {fitted.clipped} clipped to 600 tokens"
    )


def test_fit_refuses_bad_factors_and_a_tiny_window_keeps_the_first_request() -> None:
    trace = read_trace("mooncake-conv")
    with pytest.raises(SpecError, match="speed"):
        fit_trace(trace, TraceFit(speed=0.0))
    late = read_trace("azure-conv")
    assert fit_trace(late, TraceFit(window_s=1e-9)).requests == late.requests[:1]  # the first is at 0


def _source(fitted, warmup: int = 0, salt: str = "s") -> TracePromptSource:
    return TracePromptSource(fitted, seed=0, salt=salt, warmup=warmup, words=WORDS)


def test_equal_hash_ids_are_equal_token_blocks() -> None:
    fitted = fit_trace(read_trace("mooncake-conv"), TraceFit(requests=300, length_scale=1 / 64))
    src = _source(fitted)
    size = fitted.block_tokens
    assert size == 8
    seen: dict[int, list[str]] = {}
    shared = 0
    for i, r in enumerate(fitted.requests):
        words = src.prompt(i).user.split()
        assert len(words) == r.input_tokens  # exact with single-token words
        for k, hash_id in enumerate(r.hash_ids):
            block = words[k * size : (k + 1) * size]
            if not block:
                break
            if hash_id in seen:
                full = seen[hash_id]
                assert block == full[: len(block)] or full == block[: len(full)]
                shared += 1
            if len(block) == size or hash_id not in seen:
                seen[hash_id] = block
    assert shared > 100  # the excerpt reuses blocks (id 0 opens most conversations)
    # different ids are different text; the run's salt changes every block
    assert src.block(1, size) != src.block(2, size)
    assert _source(fitted, salt="other").block(1, size) != src.block(1, size)


def test_warmup_prompts_are_unique_and_trace_lengths() -> None:
    fitted = fit_trace(read_trace("mooncake-conv"), TraceFit(requests=5, length_scale=1 / 64))
    src = _source(fitted, warmup=2)
    warm = [src.prompt(i).user for i in range(2)]
    measured = [src.prompt(2 + j).user for j in range(5)]
    assert measured[0].split()[:8] == measured[1].split()[:8]  # both open with hash id 0
    assert all(w.split()[:8] != measured[0].split()[:8] for w in warm)  # warm-up primes no block
    assert [len(w.split()) for w in warm] == [r.input_tokens for r in fitted.requests[:2]]
    assert [src.output_tokens(2 + j) for j in range(5)] == [r.output_tokens for r in fitted.requests]


def test_replay_sends_at_the_traces_times_with_its_lengths() -> None:
    fake = MockOpenAI(ttft_s=0.2, itl_s=0.01)
    wl = Workload(trace="azure-conv", trace_requests=20, trace_speed=2.0, trace_length_scale=0.1, warmup_requests=2)
    result = run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock))
    want = fitted_trace(wl)
    sent = [s.send_time - result.samples[0].send_time for s in result.samples]
    assert sent == pytest.approx(want.offsets, abs=1e-6)  # virtual time: exactly the schedule
    assert [b["max_tokens"] for b in fake.received[2:]] == [r.output_tokens for r in want.requests]
    assert result.prompt_source == want.describe()
    assert result.planned == 20 and result.mode == "open"
    assert result.metrics["offered_rate"] == pytest.approx(19 / want.offsets[-1])


def test_workload_validates_trace_fields() -> None:
    with pytest.raises(SpecError, match="trace only"):
        Workload(trace_speed=2.0).validate()
    with pytest.raises(SpecError, match="drop rate"):
        Workload(trace="azure-conv", mode="open", rate=2.0).validate()
    with pytest.raises(SpecError, match="trace_length_scale"):
        Workload(trace="azure-conv", trace_length_scale=-1.0).validate()
    # the clip, then the chat template's allowance on top: a slot holds a clipped prompt once templated
    assert Workload(trace="azure-conv", trace_max_tokens=1024).validate().request_tokens == 1024 + 44
    assert "trace" not in Workload().to_dict()  # workloads without a trace read as before
    assert Workload(trace="azure-conv").to_dict()["trace_speed"] == 1.0
