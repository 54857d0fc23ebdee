"""Every timestamp form the public traces use, read in its stated unit (bench/trace_formats.py):
Azure 2023 and 2024 dates and times, Mooncake's whole milliseconds, kvtune's (and vLLM's)
timed_trace seconds, BurstGPT's seconds with its Model and Log Type filters, and kvtune's own
export replayed at the same arrival times."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.artifacts.vllm_bench import timed_trace_rows
from kvtune.bench.trace_formats import TraceRead, datetime_seconds
from kvtune.bench.traces import TraceFit, fit_trace, fitted_trace, read_trace
from kvtune.errors import SpecError
from kvtune.workload import Workload

BURSTGPT = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "6,GPT-4,300,20,320,Conversation log\n"
    "7.5,ChatGPT,1087,0,1087,Conversation log\n"
    "9,ChatGPT,200,42,242,API log\n"
    "12,GPT-4,100,10,110,API log\n"
)


def _file(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_azure_2024_timestamps_with_six_digits_and_an_offset(tmp_path: Path) -> None:
    f = _file(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:00.009930+00:00,2162,5\n"
        "2024-05-10 00:00:01.500000+00:00,100,7\n"
        "2024-05-10 00:01:00+00:00,30,2\n",
    )
    t = read_trace(f)
    assert (t.format, t.time_unit) == ("azure", "datetime")
    # to the microsecond (the file's resolution; seconds since 1970 in a double hold about 0.2 us)
    assert [r.at_s for r in t.requests] == pytest.approx([0.0, 1.49007, 59.99007], abs=1e-6)
    assert [(r.input_tokens, r.output_tokens) for r in t.requests] == [(2162, 5), (100, 7), (30, 2)]


@pytest.mark.parametrize(
    ("text", "seconds_after_epoch"),
    [
        ("1970-01-01 00:00:01.6805900", 1.68059),  # Azure 2023: seven digits, no zone (UTC)
        ("1970-01-01 00:00:01.009930+00:00", 1.00993),  # Azure 2024
        ("1970-01-01T00:00:01Z", 1.0),
        ("1970-01-01 02:00:01+02:00", 1.0),  # an offset is taken off
        ("1970-01-01 00:00:01-0130", 1.0 + 5400),
    ],
)
def test_every_date_and_time_form_is_read_to_the_same_clock(text: str, seconds_after_epoch: float) -> None:
    assert datetime_seconds(text) == pytest.approx(seconds_after_epoch, abs=1e-9)


def test_what_only_looks_like_a_date_is_none() -> None:
    assert datetime_seconds("2023-13-45 00:00:00") is None
    assert datetime_seconds("12.5") is None


def test_mooncake_whole_numbers_are_milliseconds_decimals_are_seconds(tmp_path: Path) -> None:
    rec = '{{"timestamp": {}, "input_length": 600, "output_length": 5, "hash_ids": [3, 4]}}\n'
    ms = read_trace(_file(tmp_path, rec.format(0) + rec.format(1500), "ms.jsonl"))
    assert (ms.time_unit, [r.at_s for r in ms.requests]) == ("ms", [0.0, 1.5])
    s = read_trace(_file(tmp_path, rec.format("0.0") + rec.format("1500.0"), "s.jsonl"))
    assert (s.time_unit, [r.at_s for r in s.requests]) == ("s", [0.0, 1500.0])
    # the flag overrides the rule either way
    forced = read_trace(tmp_path / "ms.jsonl", TraceRead(time_unit="s"))
    assert [r.at_s for r in forced.requests] == [0.0, 1500.0]
    forced = read_trace(tmp_path / "s.jsonl", TraceRead(time_unit="ms"))
    assert [r.at_s for r in forced.requests] == [0.0, 1.5]


def test_burstgpt_seconds_failed_rows_skipped_and_counted(tmp_path: Path) -> None:
    t = read_trace(_file(tmp_path, BURSTGPT))
    assert (t.format, t.time_unit) == ("burstgpt", "s")
    assert [(r.at_s, r.input_tokens) for r in t.requests] == [(0.0, 472), (1.0, 300), (4.0, 200), (7.0, 100)]
    assert t.skipped == (("no response (a failed request in the log)", 1),)
    ms = read_trace(tmp_path / "t.csv", TraceRead(time_unit="ms"))
    assert [r.at_s for r in ms.requests] == pytest.approx([0.0, 0.001, 0.004, 0.007])


def test_burstgpt_model_and_log_type_filters(tmp_path: Path) -> None:
    f = _file(tmp_path, BURSTGPT)
    chat = read_trace(f, TraceRead(model="chatgpt"))  # case does not matter
    assert [r.input_tokens for r in chat.requests] == [472, 200]
    assert dict(chat.skipped) == {"Model is not chatgpt": 2, "no response (a failed request in the log)": 1}
    both = read_trace(f, TraceRead(model="GPT-4", log_type="Conversation log"))
    assert [r.input_tokens for r in both.requests] == [300]
    assert both.skipped_count == 4
    with pytest.raises(SpecError, match=r"no request has Model 'gpt5' \(its values: ChatGPT, GPT-4\)"):
        read_trace(f, TraceRead(model="gpt5"))


def test_a_filter_on_a_trace_without_the_column_is_refused() -> None:
    with pytest.raises(SpecError, match="has no Model column: workload.trace_model filters a BurstGPT CSV"):
        read_trace("azure-conv", TraceRead(model="ChatGPT"))
    with pytest.raises(SpecError, match="workload.trace_log_type"):
        read_trace("azure-conv", TraceRead(log_type="API log"))


@pytest.mark.parametrize(
    ("text", "how", "needle"),
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,1,2\n",
            TraceRead("s"),
            "drop workload.trace_time_unit s",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00,1,2\n17,1,2\n",
            TraceRead(),
            "like the first row's",
        ),
        ('{"timestamp": "soon", "input_length": 1, "output_length": 1}\n', TraceRead(), "expected a timestamp"),
        ('{"timestamp": true, "input_length": 1, "output_length": 1}\n', TraceRead(), "expected a timestamp"),
    ],
)
def test_bad_timestamps_are_one_line_errors(tmp_path: Path, text: str, how: TraceRead, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        read_trace(_file(tmp_path, text), how)


def test_numeric_azure_timestamps_take_the_unit(tmp_path: Path) -> None:
    f = _file(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n1000,1,2\n3500,1,2\n")
    assert [r.at_s for r in read_trace(f).requests] == [0.0, 2500.0]  # a CSV's numbers: seconds
    assert [r.at_s for r in read_trace(f, TraceRead(time_unit="ms")).requests] == [0.0, 2.5]


def test_kvtunes_exported_timed_trace_replays_at_the_same_times(tmp_path: Path) -> None:
    """Export (vLLM's timed_trace rows, seconds), replay: the same arrivals, lengths and blocks.
    It was read as milliseconds and replayed 1000 times too fast."""
    original = fit_trace(read_trace("mooncake-conv"), TraceFit(requests=40, speed=2.0, max_tokens=9000))
    exported = _file(tmp_path, "\n".join(timed_trace_rows(original)) + "\n", "export.jsonl")
    back = read_trace(exported)
    assert back.time_unit == "s"
    assert [r.at_s for r in back.requests] == pytest.approx(original.offsets, abs=1e-6)
    assert original.offsets[-1] > 1.0  # a span a 1000x misreading would show
    assert [(r.input_tokens, r.output_tokens) for r in back.requests] == [
        (r.input_tokens, r.output_tokens) for r in original.requests
    ]
    # the blocks a request shares with earlier ones are the same ids
    for a, b in zip(original.requests, back.requests):
        assert b.hash_ids[: len(a.hash_ids)] == a.hash_ids[: len(b.hash_ids)]
    replayed = fitted_trace(Workload(trace=str(exported), trace_requests=40))
    assert replayed.offsets == pytest.approx(original.offsets, abs=1e-6)


def test_workload_checks_the_read_fields() -> None:
    with pytest.raises(SpecError, match="trace_time_unit must be one of auto, s, ms"):
        Workload(trace="azure-conv", trace_time_unit="h").validate()
    with pytest.raises(SpecError, match="trace only"):
        Workload(trace_model="ChatGPT").validate()
    with pytest.raises(SpecError, match="non-empty"):
        Workload(trace="azure-conv", trace_log_type=" ").validate()
    # left at their defaults, the new keys leave a trace study's stored form (and name) as before
    assert "trace_time_unit" not in Workload(trace="azure-conv").to_dict()
    assert Workload(trace="x.csv", trace_model="GPT-4").to_dict()["trace_model"] == "GPT-4"
