"""Prompt datasets: ShareGPT JSON, JSONL, length filters, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtune.bench.datasets import load_conversations, load_prompts
from kvtune.errors import SpecError


def _sharegpt(tmp_path: Path) -> Path:
    data = [
        {"id": "a", "conversations": [{"from": "human", "value": "one two three"}, {"from": "gpt", "value": "reply"}]},
        {
            "id": "b",
            "conversations": [
                {"from": "system", "value": "be nice"},
                {"from": "human", "value": "first human turn here"},
                {"from": "human", "value": "second human turn"},
            ],
        },
        {"id": "c", "conversations": [{"from": "gpt", "value": "no human at all"}]},
        {"id": "d", "conversations": []},
        {"id": "e", "conversations": [{"role": "user", "content": "openai spelling works too"}]},
    ]
    p = tmp_path / "sharegpt.json"
    p.write_text(json.dumps(data))
    return p


def test_sharegpt_takes_the_first_human_turn_and_skips_records_without_one(tmp_path: Path) -> None:
    d = load_prompts(_sharegpt(tmp_path))
    assert d.prompts == ["one two three", "first human turn here", "openai spelling works too"]
    assert d.records == 5 and d.usable == 3 and d.counted_by == "words"
    assert "3 prompts kept of 5 records" in d.describe()


def test_length_filter_by_words_without_a_tokenizer(tmp_path: Path) -> None:
    d = load_prompts(_sharegpt(tmp_path), min_tokens=4, max_tokens=4)
    assert d.prompts == ["first human turn here", "openai spelling works too"]


def test_length_filter_by_tokens_with_a_counter(tmp_path: Path) -> None:
    chars = lambda t: len(t)  # a stand-in tokenizer: one token per character
    d = load_prompts(_sharegpt(tmp_path), count=chars, count_exact=True, max_tokens=13)
    assert d.prompts == ["one two three"] and d.counted_by == "tokens (exact)"


def test_jsonl_of_prompt_objects_and_strings(tmp_path: Path) -> None:
    p = tmp_path / "p.jsonl"
    p.write_text(
        '{"prompt": "alpha beta"}\n\n"just a string"\n'
        '{"conversations": [{"from": "human", "value": "sharegpt line"}]}\n'
        '{"other": 1}\n'
    )
    d = load_prompts(p)
    assert d.prompts == ["alpha beta", "just a string", "sharegpt line"]
    assert d.records == 4


def test_json_list_of_strings(tmp_path: Path) -> None:
    p = tmp_path / "list.json"
    p.write_text(json.dumps(["x y", {"prompt": "z"}, "  "]))
    assert load_prompts(p).prompts == ["x y", "z"]


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (None, "does not exist"),
        ("", "is empty"),
        ("[1, 2", "not valid JSON"),
        ('{"prompt": "a"}\n{bad\n', "line 2 is not valid JSON"),
        ("[1, 2, 3]", "has no prompts"),
        ('{"a": 1}', "has no prompts"),
    ],
)
def test_errors_are_one_line_spec_errors(tmp_path: Path, content: str | None, expect: str) -> None:
    p = tmp_path / "d.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(SpecError) as e:
        load_prompts(p)
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_directory_and_non_utf8_are_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is a directory"):
        load_prompts(tmp_path)
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_prompts(p)


def test_nothing_left_after_filtering_says_so(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="none of its 3 prompts is between 50 and 60 words"):
        load_prompts(_sharegpt(tmp_path), min_tokens=50, max_tokens=60)


def test_conversations_keep_every_human_turn_in_order(tmp_path: Path) -> None:
    d = load_conversations(_sharegpt(tmp_path))
    assert d.conversations == [
        ["one two three"],
        ["first human turn here", "second human turn"],
        ["openai spelling works too"],
    ]
    assert d.records == 5 and "3 conversations of 5 records, 1.3 human turns each" in d.describe()


def test_a_byte_order_mark_is_skipped_and_a_pipe_is_refused_unread(tmp_path: Path) -> None:
    """An editor's UTF-8 byte-order mark was 'line 1 is not valid JSON: Unexpected UTF-8 BOM',
    where a trace and a study file read past it; a named pipe blocked the read for ever."""
    import os

    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(["one prompt", "another prompt"]).encode())
    assert load_prompts(p).prompts == ["one prompt", "another prompt"]
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    with pytest.raises(SpecError, match=r"dataset '.*pipe\.jsonl' is a named pipe \(FIFO\), not a file"):
        load_prompts(pipe)
