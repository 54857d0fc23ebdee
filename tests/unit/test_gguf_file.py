"""gguf_file.is_gguf: the one place that answers "is this a GGUF file?" (models, planner, tokenizer)."""

import pytest

from kvtune.gguf_file import is_gguf


def test_the_magic_bytes_decide_not_the_name(tmp_path):
    real, named, short = tmp_path / "model.bin", tmp_path / "fake.gguf", tmp_path / "short"
    real.write_bytes(b"GGUF\x03\x00\x00\x00")
    named.write_bytes(b"PK\x03\x04 not gguf")
    short.write_bytes(b"GG")
    assert is_gguf(real) and not is_gguf(named) and not is_gguf(short)


def test_an_unreadable_path_raises_for_the_caller_to_word(tmp_path):
    with pytest.raises(OSError):
        is_gguf(tmp_path / "missing.gguf")
