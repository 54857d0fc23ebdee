"""Exact prompt sizes from the demo GGUF's own vocabulary (and an HF tokenizer when at hand).

The GGUF route runs the file's BPE merges per word; the HF `tokenizers` library, when
installed, is the independent referee here, and tests/e2e/test_bench_llama_server.py checks the
same prompts against llama-server's /tokenize.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.bench.prompts import PromptSource, exact_prompt, word_nonce
from kvtune.bench.tokenizer import GGUFVocab, load_tokenizer, try_load_tokenizer
from kvtune.errors import KvtuneError, SpecError
from kvtune.workload import Workload


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    pytest.importorskip("gguf")
    from kvtune.launchers.models import demo_model_path

    try:
        return demo_model_path(fetch=False)
    except KvtuneError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def vocab(gguf_path: Path):
    return load_tokenizer(str(gguf_path))


@pytest.fixture(scope="module")
def hf(gguf_path: Path):
    """The same model's HF tokenizer.json (converted demo folder), when present."""
    pytest.importorskip("tokenizers")
    folder = gguf_path.parent / "SmolLM2-135M-Instruct-hf"
    if not (folder / "tokenizer.json").is_file():
        pytest.skip("no converted HF tokenizer of the demo model in the cache")
    return load_tokenizer(str(folder))


def test_demo_gguf_gives_many_single_token_words(vocab) -> None:
    assert isinstance(vocab, GGUFVocab) and vocab.model == "gpt2"
    words = vocab.single_token_words()
    assert len(words) >= 500
    assert "the" in words and all(w.isalpha() and w.islower() for w in words)
    for w in words[:200]:
        assert vocab.count(w) == 1 and vocab.count(f" {w}") == 1


@pytest.mark.parametrize("n", [1, 3, 4, 17, 200, 1000])
def test_exact_prompt_has_exactly_n_tokens_by_the_gguf_vocab(vocab, n: int) -> None:
    p = exact_prompt(5, n, seed=1, words=vocab.single_token_words(), salt="s")
    assert len(p.split()) == n and vocab.count(p) == n


def test_gguf_words_are_single_tokens_for_the_hf_tokenizer_too(vocab, hf) -> None:
    words = vocab.single_token_words()
    assert all(hf.count(w) == 1 and hf.count(" " + w) == 1 for w in words)
    for n in (1, 50, 512):
        p = exact_prompt(9, n, seed=0, words=words, salt="x")
        assert hf.count(p) == n


def test_hf_tokenizer_counts_exactly_and_has_words(hf) -> None:
    assert hf.exact_count
    assert hf.count("hello world") == 2
    words = hf.single_token_words()
    assert len(words) >= 500
    p = exact_prompt(1, 64, 0, words)
    assert hf.count(p) == 64


def test_gguf_count_of_free_text_is_close(vocab, hf) -> None:
    text = (
        "The quick brown fox jumps over the lazy dog. It's 2024; tokenizers aren't "
        "all alike, are they?\n\nA second paragraph with more words in it."
    ) * 5
    assert abs(vocab.count(text) - hf.count(text)) <= 0.05 * hf.count(text)


def test_prompt_source_sizes_with_shared_prefix_are_exact(vocab) -> None:
    wl = Workload(prompt_tokens=40, shared_prefix_fraction=0.5, shared_prefix_tokens=100)
    src = PromptSource(wl, "salt", words=vocab.single_token_words())
    assert src.exact
    prompts = [src.prompt(i) for i in range(10)]
    for p in prompts:
        assert p.tokens == 140
        assert vocab.count(p.user) == 40 and vocab.count(p.system) == 100
        assert vocab.count(p.as_text()) == 140
    shared = [p for p in prompts if p.shared_prefix]
    assert len(shared) == 5 and len({p.system for p in shared}) == 1
    assert len({p.system for p in prompts if not p.shared_prefix}) == 5  # all unique
    assert len({p.user.split()[0] for p in prompts}) == 10  # unique first token per request


def test_word_nonce_first_word_unique_over_consecutive_indices() -> None:
    words = [f"w{i}" for i in range(100)]
    firsts = [word_nonce(i, 0, words, "s")[0] for i in range(100)]
    assert len(set(firsts)) == 100
    assert word_nonce(3, 0, words, "a") != word_nonce(3, 0, words, "b")


def test_sentencepiece_vocab_merges_by_score() -> None:
    # "▁tea" is in the vocabulary but no merge path reaches it: not a single-token word.
    toks = ["<unk>", "▁", "t", "h", "e", "a", "▁t", "he", "▁the", "▁a", "▁tea"]
    scores = [0.0, -1, -1, -1, -1, -1, -0.5, -0.4, -0.1, -0.2, -0.05]
    v = GGUFVocab("llama", toks, [], scores, name="toy")
    assert v.count("the") == 1 and v.count("the the a") == 3
    assert v.count("tea") == 3
    assert v.single_token_words() == ["the"]


def test_missing_tokenizer_path_is_an_error_and_none_is_approximate(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        try_load_tokenizer(tmp_path / "nope.gguf")
    tok, note = try_load_tokenizer(None)
    assert tok is None and "approximate" in note


def test_unsupported_sources_fall_back_or_say_what_is_wrong(tmp_path: Path) -> None:
    from kvtune.bench.tokenizer import TokenizerUnavailable

    with pytest.raises(TokenizerUnavailable):
        GGUFVocab("bert", ["a"], [], [], name="x")
    with pytest.raises(SpecError, match="tokenizer"):
        try_load_tokenizer(tmp_path)
