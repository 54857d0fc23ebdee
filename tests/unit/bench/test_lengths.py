"""Synthetic lengths drawn per request (bench/lengths.py, issue 30 item 4): a seeded lognormal of
the workload's mean and spread, the same draws for every config of a comparison, clamped to
[1, the p99 a slot is sized for], spread 0 the constant length; and the load client asking for
each drawn length (the exact prompt's words, the body's `max_tokens`)."""

from __future__ import annotations

import statistics

from kvtune.bench.client import BenchOptions, run
from kvtune.bench.lengths import drawn_length, output_length, prompt_length, prompt_size_words
from kvtune.bench.prompts import PromptSource
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload, length_cap

WORDS = [f"w{i}" for i in range(50)]  # stand-ins for a tokenizer's single-token words


def test_spread_zero_is_the_constant_length():
    assert {drawn_length("prompt", 200, 0.0, seed, i) for seed in (0, 7) for i in range(100)} == {200}
    w = Workload()
    assert [prompt_length(w, i) for i in range(5)] == [200] * 5 and output_length(w, 3) == 64
    assert prompt_size_words(w) == "200"


def test_draws_are_seeded_by_the_workload_seed_and_index_alone():
    a = [drawn_length("prompt", 200, 0.5, 3, i) for i in range(50)]
    again = [drawn_length("prompt", 200, 0.5, 3, i) for i in reversed(range(50))][::-1]
    assert a == again  # the same draws in any order: two configs, a warm-up, a rerun
    assert a != [drawn_length("prompt", 200, 0.5, 4, i) for i in range(50)]  # another seed, other draws
    assert a != [drawn_length("output", 200, 0.5, 3, i) for i in range(50)]  # prompts and outputs independent
    assert len(set(a)) > 25  # lengths, not a constant


def test_the_mean_over_many_draws_is_the_given_mean():
    for mean, spread in ((200, 0.5), (64, 0.3), (1000, 1.0)):
        draws = [drawn_length("prompt", mean, spread, 0, i) for i in range(20000)]
        # clamping the top 1% at the p99 takes a few percent off the mean (more at larger sigma)
        assert 0.90 * mean < statistics.fmean(draws) < 1.02 * mean, (mean, spread, statistics.fmean(draws))
        assert statistics.median(draws) < mean  # a lognormal's long right tail


def test_draws_are_clamped_to_one_and_the_p99():
    cap = length_cap(200, 0.5)
    assert cap == 565  # exp(ln 200 - 0.125 + 2.326 * 0.5) = 564.6, rounded up
    draws = [drawn_length("prompt", 200, 0.5, 0, i) for i in range(20000)]
    assert max(draws) == cap and 0.005 < draws.count(cap) / len(draws) < 0.015  # about 1% at the cap
    tiny = [drawn_length("output", 2, 1.5, 0, i) for i in range(2000)]
    assert min(tiny) == 1 and max(tiny) == length_cap(2, 1.5)
    assert length_cap(10, 5.0) == 10  # a p99 below the mean (sigma > 4.65) never caps under it


def test_exact_prompts_have_the_drawn_length_and_bodies_the_drawn_output():
    w = Workload(prompt_spread=0.5, output_spread=0.4, seed=2).validate()
    source = PromptSource(w, "salt", words=WORDS)
    for i in range(20):
        p = source.prompt(i)
        assert p.tokens == prompt_length(w, i) == len(p.user.split())
        assert source.output_tokens(i) == output_length(w, i)
    assert prompt_size_words(w) == "~lognormal(mean 200, sigma 0.5) up to 565"


def test_the_client_asks_for_each_drawn_output_length():
    w = Workload(concurrency=2, num_requests=12, warmup_requests=2, output_spread=0.6, request_timeout_s=30.0)
    fake = MockOpenAI(ttft_s=0.01, itl_s=0.001)
    res = run(fake.base_url, w, BenchOptions("m", transport=fake.transport(), clock=fake.clock))
    assert all(s.ok for s in res.samples), [s.error for s in res.samples if not s.ok]
    measured = sorted(output_length(w, w.warmup_requests + i) for i in range(w.num_requests))
    assert sorted(s.output_tokens for s in res.samples) == measured
    assert len(set(measured)) > 3  # the draws differ, and each was forced
