"""gguf_file: the one place that answers "is this a GGUF file?" (is_gguf: models, planner, tokenizer)
and "is it a whole one?" (read_gguf)."""

import functools
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtune.errors import ModelError
from kvtune.gguf_file import is_gguf, read_gguf


def test_the_magic_bytes_decide_not_the_name(tmp_path):
    real, named, short = tmp_path / "model.bin", tmp_path / "fake.gguf", tmp_path / "short"
    real.write_bytes(b"GGUF\x03\x00\x00\x00")
    named.write_bytes(b"PK\x03\x04 not gguf")
    short.write_bytes(b"GG")
    assert is_gguf(real) and not is_gguf(named) and not is_gguf(short)


def test_an_unreadable_path_raises_for_the_caller_to_word(tmp_path):
    with pytest.raises(OSError):
        is_gguf(tmp_path / "missing.gguf")


@functools.lru_cache(maxsize=1)
def small_gguf() -> bytes:
    """A whole GGUF of two small tensors and a few metadata keys, written by gguf's own writer."""
    import numpy as np
    from gguf import GGUFWriter

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "small.gguf"
        w = GGUFWriter(str(path), "llama")
        w.add_block_count(2)
        w.add_context_length(256)
        w.add_tensor("t0", np.arange(64, dtype=np.float32))
        w.add_tensor("t1", np.ones((4, 8), dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path.read_bytes()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_gguf_cut_anywhere_is_one_model_error_naming_it(tmp_path_factory, data):
    """Issue 41: every cut of a GGUF (header, metadata, tensor table, tensor data) is refused as
    not readable, naming the file as the caller says, never the reader's IndexError."""
    whole = small_gguf()
    cut = data.draw(st.integers(0, len(whole) - 1))
    f = tmp_path_factory.mktemp("gguf") / "cut.gguf"
    f.write_bytes(whole[:cut])
    with pytest.raises(ModelError, match=rf"^--model 'cut.gguf' is not a readable GGUF file \({cut} bytes, cut short"):
        read_gguf(f, "--model 'cut.gguf'")
    f.write_bytes(whole)
    assert read_gguf(f).fields["general.architecture"]
