"""A study file's bytes read strictly (study/study_yaml.py; issue 41): every file that is not a
few dozen keys of UTF-8 YAML is one SpecError line naming it, drawn over the whole class: any
bytes that are not UTF-8, any binary file, any GGUF, any size over the cap, any alias expansion
past the cap, an alias to itself at any depth, and any key written twice in any mapping at any
depth (the study file's own keys, the workload's and the space's among them)."""

from __future__ import annotations

import os
import string
from dataclasses import fields

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvtune.errors import SpecError
from kvtune.study.settings import top_keys
from kvtune.study.study_file import load_study_file
from kvtune.study.study_yaml import MAX_BYTES, MAX_NODES, parse_study_yaml
from kvtune.workload import Workload

UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")  # UTF-16 text: refused as such, not as bytes that are not UTF-8

NAME = "study file 's.yaml'"
KEYS = st.one_of(
    st.sampled_from(sorted(top_keys())),
    st.sampled_from([f.name for f in fields(Workload)]),
    st.sampled_from(["parallel", "threads", "flash-attn", "ctx-per-slot", "env:OMP_NUM_THREADS"]),
    st.text(string.ascii_lowercase + "_-", min_size=1, max_size=12).filter(lambda k: k[0].isalpha()),
).filter(lambda k: yaml.safe_load(k) == k)  # a plain word, not one YAML reads as true, null, ...
VALUES = st.one_of(st.integers(-5, 100), st.sampled_from(["on", '"on"', "1s", "x", "[1, 2]", "{low: 1, high: 2}"]))


def refusal(raw: bytes) -> str:
    with pytest.raises(SpecError) as e:
        parse_study_yaml(raw, NAME)
    text = str(e.value)
    assert "\n" not in text and text.startswith(NAME), text
    return text


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=300))
def test_bytes_that_are_not_utf8_are_refused_as_such(raw):
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        assume(False)
    assume(b"\0" not in raw and not raw.startswith((b"GGUF", *UTF16_MARKS)))  # classes of their own
    assert "is not UTF-8 text (byte 0x" in refusal(raw)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100), st.binary(max_size=100))
def test_any_file_with_a_nul_byte_is_binary_and_any_gguf_is_a_model(before, after):
    assume(not before.startswith(b"GGUF") and not (before + b"\0").startswith(UTF16_MARKS))
    assert "is a binary file" in refusal(before + b"\0" + after)
    assert "is a GGUF model, not a YAML study file: pass it as --model" in refusal(b"GGUF" + before + after)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 4096), st.sampled_from([b"# a comment\n", b"study: s\n", b"x"]))
def test_anything_over_the_cap_is_refused_by_its_size_before_it_is_parsed(extra, unit):
    raw = (unit * (MAX_BYTES // len(unit) + 1))[: MAX_BYTES + extra]
    assert "is over 1 MiB" in refusal(raw)


def expanded(width: int, depth: int) -> int:
    """The values of the document `laughs` writes, every alias expanded (mapping, keys, values)."""
    level = 1 + width  # a list of `width` strings
    total = 1 + 1 + level
    for _ in range(depth):
        level = 1 + width * level
        total += 1 + level
    return total


def laughs(width: int, depth: int) -> bytes:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth + 1)]
    return ("\n".join(lines) + "\n").encode()


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 10), st.integers(0, 8))
def test_aliases_are_refused_exactly_when_they_expand_past_the_cap(width, depth):
    raw = laughs(width, depth)
    if expanded(width, depth) > MAX_NODES:
        assert "holds more than 10000 values once its aliases are expanded" in refusal(raw)
    else:
        assert set(parse_study_yaml(raw, NAME)) == {f"l{i}" for i in range(depth + 1)}


@settings(max_examples=100, deadline=None)
@given(st.lists(KEYS, max_size=4, unique=True), st.sampled_from(["[*a]", "{k: *a}", "[1, [2, *a]]"]))
def test_an_alias_to_itself_is_refused_at_any_depth(path, body):
    text = "".join(f"{'  ' * i}{k}:\n" for i, k in enumerate(path)) + f"{'  ' * len(path)}x: &a {body}\n"
    assert "has an alias that refers to itself" in refusal(text.encode())


@settings(max_examples=300, deadline=None)
@given(
    path=st.lists(KEYS, max_size=3, unique=True),
    key=KEYS,
    between=st.lists(KEYS, max_size=3, unique=True),
    first=VALUES,
    second=VALUES,
)
def test_a_key_given_twice_in_any_mapping_names_the_key_and_both_lines(path, key, between, first, second):
    assume(key not in between)
    pad = "  " * len(path)
    text = "".join(f"{'  ' * i}{k}:\n" for i, k in enumerate(path))
    text += f"{pad}{key}: {first}\n" + "".join(f"{pad}{k}: 1\n" for k in between) + f"{pad}{key}: {second}\n"
    line = len(path) + 1
    message = refusal(text.encode())
    assert f"gives the key {key!r} twice (lines {line} and {line + len(between) + 1})" in message


def test_merge_keys_still_override_and_a_file_of_one_key_each_loads(tmp_path):
    text = "base: &b {concurrency: 2, num_requests: 8}\nother:\n  <<: *b\n  concurrency: 4\n"
    assert parse_study_yaml(text.encode(), NAME)["other"] == {"concurrency": 4, "num_requests": 8}
    f = tmp_path / "s.yaml"
    f.write_bytes("\ufeffstudy: café\n".encode())  # UTF-8 with a byte-order mark
    assert load_study_file(f) == {"study": "café"}


def test_the_file_is_named_and_a_folder_or_an_empty_path_is_refused(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(64))
    with pytest.raises(SpecError, match=r"study file '.*m.gguf' is a GGUF model"):
        load_study_file(tmp_path / "m.gguf")
    with pytest.raises(SpecError, match="is a folder: give a YAML file in it"):
        load_study_file(tmp_path)
    with pytest.raises(SpecError, match="^--study-file is empty"):
        load_study_file("")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_utf16_study_file_is_named_by_its_encoding(encoding, tmp_path):
    """Windows' "Unicode" save: its byte-order mark says UTF-16, which was refused as a binary
    file (it holds NUL bytes) though it is text in another encoding."""
    raw = "study: s\n".encode(encoding)
    if encoding == "utf-16-be":
        raw = b"\xfe\xff" + raw
    with pytest.raises(SpecError, match="^study file 'x.yaml' is UTF-16 text: .* save it as UTF-8$"):
        parse_study_yaml(raw, "study file 'x.yaml'")
    pipe = tmp_path / "pipe.yaml"
    os.mkfifo(pipe)
    with pytest.raises(SpecError, match=r"is a named pipe \(FIFO\), not a file"):
        load_study_file(pipe)  # refused unread: the read would block until something wrote into it
