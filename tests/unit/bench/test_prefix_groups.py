"""Several prefix groups (issue 30 item 4): the requests that share a system prompt are dealt
round-robin among `shared_prefix_groups` distinct shared prompts, so subsets of users each reuse
their own prefix; one group is the single shared prompt of before."""

from __future__ import annotations

import pytest

from kvtune.bench.client import BenchOptions, run
from kvtune.bench.prompts import PromptSource, shared_prefix_group, shared_prefix_member
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload

WORDS = [f"w{i}" for i in range(50)]  # stand-ins for a tokenizer's single-token words


def _w(fraction: float, groups: int, **kw: object) -> Workload:
    return Workload(
        shared_prefix_fraction=fraction,
        shared_prefix_tokens=30,
        shared_prefix_groups=groups,
        **kw,  # type: ignore[arg-type]
    ).validate()


@pytest.mark.parametrize("words", [WORDS, None])
def test_sharing_requests_get_group_j_mod_k_and_each_group_one_prompt(words: list[str] | None) -> None:
    src = PromptSource(_w(1.0, 3), "salt", words=words)
    prompts = [src.prompt(i) for i in range(12)]
    assert [p.group for p in prompts] == [i % 3 for i in range(12)]
    by_group = {g: {p.system for p in prompts if p.group == g} for g in range(3)}
    assert all(len(texts) == 1 for texts in by_group.values())  # one prompt per group ...
    assert len({next(iter(t)) for t in by_group.values()}) == 3  # ... and three different ones
    assert all(p.shared_prefix for p in prompts)


def test_with_a_fraction_the_sharers_are_split_evenly_and_the_rest_stay_unique() -> None:
    src = PromptSource(_w(0.5, 2), "salt", words=WORDS)
    prompts = [src.prompt(i) for i in range(40)]
    sharers = [p for p in prompts if p.shared_prefix]
    assert len(sharers) == 20 and [p.group for p in sharers].count(0) == 10  # not all in one group
    others = [p.system for p in prompts if not p.shared_prefix]
    assert len(set(others)) == 20 and not set(others) & {p.system for p in sharers}
    assert {p.tokens for p in prompts} == {200 + 30}  # every request does the same work


def test_one_group_is_the_single_shared_prompt_of_before() -> None:
    one = PromptSource(_w(0.5, 1), "salt", words=WORDS)
    shared = {one.prompt(i).system for i in range(20) if shared_prefix_member(i, 0.5)}
    assert len(shared) == 1 and shared == {one._text(-1, 30, "shared")}  # the key -1 it always had
    assert shared_prefix_group(7, 1.0, 1) == 0


def test_a_prefix_cache_serves_each_groups_prompt_after_its_first_request() -> None:
    """On the fake's prefix cache: with 3 groups the first request of each group pays for its
    system prompt, every later sharer finds it (the server's own cache_n says so)."""
    fake = MockOpenAI(ttft_s=0.01, itl_s=0.001, prefix_cache=True)
    wl = _w(1.0, 3, concurrency=1, num_requests=9, warmup_requests=0, prompt_tokens=10, output_tokens=2)
    res = run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock, tokenizer=None))
    cached = [s.server_timings["cache_n"] for s in res.samples if s.server_timings]
    system_words = len(fake.received[0]["messages"][0]["content"].split())  # ~30 tokens, in the fake's words
    assert cached == [0, 0, 0] + [system_words] * 6 and system_words > 10
    assert "in 3 groups" in res.prompt_source
