"""Synthetic prompts: unique nonce first, deterministic, about the requested size."""

from __future__ import annotations

import re

from kvtune.bench.prompts import prompt_nonce, synthetic_prompt


def test_starts_with_nonce_of_seed_and_index() -> None:
    p = synthetic_prompt(3, 200, seed=7)
    assert re.match(r"^\[req-7-3-[0-9a-f]{8}\] ", p)
    assert p.startswith(prompt_nonce(3, 7))


def test_deterministic_given_index_and_seed() -> None:
    assert synthetic_prompt(5, 100, 1) == synthetic_prompt(5, 100, 1)
    assert synthetic_prompt(5, 100, 1) != synthetic_prompt(6, 100, 1)
    assert synthetic_prompt(5, 100, 1) != synthetic_prompt(5, 100, 2)


def test_no_two_prompts_share_a_prefix() -> None:
    prompts = [synthetic_prompt(i, 50, 0) for i in range(1000)]
    # The nonce makes even the first ~20 characters (a handful of tokens) unique.
    assert len({p[:20] for p in prompts}) == len(prompts)


def test_salt_changes_nonce_but_not_the_work() -> None:
    a = synthetic_prompt(2, 100, 0, salt="aaaa")
    b = synthetic_prompt(2, 100, 0, salt="bbbb")
    assert a.split("] ", 1)[0] != b.split("] ", 1)[0]
    assert a.split("] ", 1)[1] == b.split("] ", 1)[1]


def test_size_is_about_prompt_tokens_of_lowercase_words() -> None:
    for n in (20, 200, 2000):
        words = synthetic_prompt(0, n, 0).split("] ", 1)[1].split()
        assert n - 15 <= len(words) <= n
        assert all(w.isalpha() and w.islower() for w in words)


def test_tiny_prompt_still_has_nonce_and_a_word() -> None:
    p = synthetic_prompt(0, 1, 0)
    assert p.startswith("[req-0-0-")
    assert len(p.split("] ", 1)[1].split()) >= 1
