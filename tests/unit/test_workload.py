"""The workload spec (workload.py): the context one request occupies, and `validate` refusing
each impossible setting with a one-line SpecError that names the field and what to write."""

from __future__ import annotations

import math

import pytest

from kvtune.errors import SpecError
from kvtune.workload import ARRIVALS, ENDPOINTS, MODES, Workload


def test_the_default_is_the_demo_workload_and_valid():
    w = Workload().validate()
    assert (w.concurrency, w.prompt_tokens, w.output_tokens, w.mode) == (8, 200, 64, "closed")
    assert w.num_requests == 4 * w.concurrency and w.warmup_requests == w.concurrency
    assert w.mode in MODES and w.arrival in ARRIVALS and w.endpoint in ENDPOINTS


def test_request_tokens_is_prompt_plus_shared_prefix_plus_output():
    assert Workload(prompt_tokens=100, output_tokens=20).request_tokens == 120
    shared = Workload(prompt_tokens=100, output_tokens=20, shared_prefix_fraction=0.5, shared_prefix_tokens=30)
    assert shared.request_tokens == 150
    dataset = Workload(prompt_tokens=100, output_tokens=20, dataset="d.jsonl", dataset_max_tokens=400)
    assert dataset.request_tokens == 420  # prompts are filtered to dataset_max_tokens
    assert Workload(prompt_tokens=100, output_tokens=20, dataset="d.jsonl").request_tokens == 120  # a stated guess


def test_open_loop_needs_a_rate() -> None:
    """(moved from tests/unit/bench/test_open_loop.py)"""
    with pytest.raises(SpecError, match="needs workload.rate"):
        Workload(mode="open").validate()
    with pytest.raises(SpecError, match="mode 'open' only"):
        Workload(rate=3.0).validate()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"concurrency": 0}, "workload.concurrency must be at least 1, got 0"),
        ({"output_tokens": -1}, "workload.output_tokens must be at least 1, got -1"),
        ({"warmup_requests": -1}, "workload.warmup_requests must be >= 0, got -1"),
        ({"request_timeout_s": math.inf}, "workload.request_timeout_s must be a positive number, got inf"),
        ({"seed": 2**32}, "workload.seed must be between 0 and 2**32-1, got 4294967296"),
        ({"mode": "burst"}, "workload.mode must be one of closed, open, got 'burst'"),
        ({"mode": "open", "rate": 0.0}, "workload.rate must be a positive number of requests/s, got 0.0"),
        ({"arrival": "uniform"}, "workload.arrival must be one of poisson, gamma, constant, got 'uniform'"),
        ({"burstiness": 0.5}, "workload.burstiness needs arrival: gamma (Poisson is burstiness 1)"),
        ({"arrival": "gamma", "burstiness": -1.0}, "workload.burstiness must be a positive number, got -1.0"),
        ({"duration_s": 0}, "workload.duration_s must be a positive number of seconds, got 0"),
        ({"endpoint": "embeddings"}, "workload.endpoint must be one of chat, completions, got 'embeddings'"),
        ({"dataset": "  "}, "workload.dataset is empty: give a file path or leave it out"),
        ({"dataset_min_tokens": -2}, "workload.dataset_min_tokens must be >= 0, got -2"),
        ({"dataset_max_tokens": 0}, "workload.dataset_max_tokens must be at least 1, got 0"),
        (
            {"dataset_min_tokens": 50, "dataset_max_tokens": 10},
            "workload.dataset_max_tokens (10) is below dataset_min_tokens (50)",
        ),
        ({"shared_prefix_fraction": 1.5}, "workload.shared_prefix_fraction must be between 0 and 1, got 1.5"),
        ({"shared_prefix_tokens": -1}, "workload.shared_prefix_tokens must be >= 0, got -1"),
        ({"shared_prefix_fraction": 0.5}, "workload.shared_prefix_fraction > 0 needs shared_prefix_tokens >= 1"),
    ],
)
def test_an_impossible_setting_is_one_line_naming_the_field(fields, message):
    with pytest.raises(SpecError) as e:
        Workload(**fields).validate()
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_valid_open_timed_gamma_workload_passes_and_round_trips_to_a_dict():
    w = Workload(mode="open", rate=2.5, arrival="gamma", burstiness=0.5, duration_s=30.0).validate()
    assert Workload(**w.to_dict()) == w


def test_a_multi_turn_workload_sizes_the_slot_for_its_last_turn_and_round_trips():
    w = Workload(multiturn=True, turns=4, prompt_tokens=100, output_tokens=20, num_requests=10).validate()
    # the template's 32 once, then four turns of input, answer and 12 template tokens each
    assert w.request_tokens == 32 + 4 * (100 + 20 + 12) and w.conversations == 3
    assert Workload(multiturn=True, conversation_max_tokens=2000).request_tokens == 2000
    assert Workload(**w.to_dict()) == w and w.reuses_prefixes
    plain = Workload()
    assert not {"multiturn", "turns", "think_time_s", "conversation_max_tokens"} & set(plain.to_dict())
    assert not plain.reuses_prefixes and Workload(trace="azure-conv").reuses_prefixes


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"turns": 3}, "workload.turns applies to multi-turn only: set workload.multiturn: true"),
        ({"think_time_s": 1.0}, "workload.think_time_s applies to multi-turn only"),
        ({"multiturn": True, "turns": 0}, "workload.turns must be at least 1, got 0"),
        ({"multiturn": True, "think_time_s": -1}, "workload.think_time_s must be a number of seconds >= 0, got -1"),
        (
            {"multiturn": True, "duration_s": 60.0},
            "workload.multiturn runs chat conversations: drop duration_s (or set mode: open)",
        ),
        ({"multiturn": True, "endpoint": "completions"}, "workload.multiturn runs chat conversations: drop endpoint"),
        (
            {"multiturn": True, "conversation_max_tokens": 100},
            "workload.conversation_max_tokens (100) cannot hold one turn: at least prompt + output + 32",
        ),
    ],
)
def test_an_impossible_multi_turn_setting_is_one_line(fields, message):
    with pytest.raises(SpecError) as e:
        Workload(**fields).validate()
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "fields,words",
    [
        (
            {"concurrency": 4, "prompt_tokens": 128, "output_tokens": 32},
            "4 concurrent users, 128 prompt / 32 output tokens",
        ),
        ({"mode": "open", "rate": 2.5}, "open loop at 2.5 req/s (poisson), 200 prompt / 64 output tokens"),
        ({"dataset": "sg.json"}, "8 concurrent users, prompts of sg.json / 64 output tokens"),
        ({"trace": "azure-conv"}, "trace azure-conv at its own arrival times and lengths, its first 32 requests"),
        (
            {"trace": "azure-conv", "trace_window_s": 60.0},
            "trace azure-conv at its own arrival times and lengths, the requests of its first 60 s",
        ),
        (
            {"trace": "mooncake-conv", "trace_length_scale": 0.014},
            "trace mooncake-conv at its own arrival times, lengths scaled by 0.014, its first 32 requests",
        ),
        (
            {"trace": "azure-conv", "trace_speed": 2.5},
            "trace azure-conv at 2.5x its recorded rate, its own lengths, its first 32 requests",
        ),
        (
            {"multiturn": True, "turns": 4, "think_time_s": 1.0, "concurrency": 4, "num_requests": 16},
            "4 concurrent users replaying 4 conversations of 4 turns, 1 s think time, each turn carrying the "
            "history so far; 200 new prompt / 64 output tokens per turn",
        ),
    ],
)
def test_the_load_in_words_names_what_is_replayed(fields, words):
    """kvtune run's header, kvtune bench's and the report's: a multi-turn study's header said
    "4 concurrent users, ~128 prompt tokens" as if every request were a first turn."""
    assert Workload(**fields).validate().describe() == words


def test_drawn_lengths_size_the_slot_for_their_p99_not_their_mean():
    w = Workload(prompt_tokens=200, output_tokens=64, prompt_spread=0.5, output_spread=0.3).validate()
    p99_prompt = math.ceil(math.exp(math.log(200) - 0.5**2 / 2 + 2.3263478740408408 * 0.5))
    p99_output = math.ceil(math.exp(math.log(64) - 0.3**2 / 2 + 2.3263478740408408 * 0.3))
    assert (p99_prompt, p99_output) == (565, 123)
    assert w.request_tokens == p99_prompt + p99_output > Workload().request_tokens == 264
    assert w.request_parts() == "prompt 565 + output 123 (p99 of the drawn lengths)"
    shared = Workload(prompt_spread=0.5, shared_prefix_fraction=0.5, shared_prefix_tokens=30)
    assert shared.request_tokens == 565 + 30 + 64
    # a dataset's prompts are filtered to dataset_max_tokens; only the output is drawn
    data = Workload(dataset="d.jsonl", dataset_max_tokens=400, output_spread=0.3)
    assert data.validate().request_tokens == 400 + 123
    assert Workload(prompt_spread=0.0).request_tokens == 264  # spread 0: today's constant


def test_drawn_lengths_are_described_and_saved_only_when_set():
    w = Workload(prompt_spread=0.5)
    assert w.describe() == "8 concurrent users, prompts ~lognormal(mean 200, sigma 0.5) up to 565 / 64 output tokens"
    both = Workload(prompt_spread=0.5, output_spread=0.3).describe()
    assert both.endswith("/ outputs ~lognormal(mean 64, sigma 0.3) up to 123")
    assert "prompt_spread" not in Workload().to_dict()  # a study's name and record as before
    assert Workload(output_spread=0.3).to_dict()["output_spread"] == 0.3
    assert Workload(**Workload(prompt_spread=0.5).to_dict()) == Workload(prompt_spread=0.5)


@pytest.mark.parametrize(
    ("kw", "phrase"),
    [
        ({"prompt_spread": -0.1}, "workload.prompt_spread must be a finite number >= 0"),
        ({"output_spread": math.inf}, "workload.output_spread must be a finite number >= 0"),
        ({"output_spread": math.nan}, "workload.output_spread must be a finite number >= 0"),
        ({"prompt_spread": "wide"}, "workload.prompt_spread must be a finite number >= 0"),
        ({"prompt_spread": 0.5, "dataset": "d.json"}, "but dataset sets its own: drop prompt_spread"),
        ({"prompt_spread": 0.5, "trace": "azure-conv"}, "but trace sets its own: drop prompt_spread"),
        ({"output_spread": 0.5, "trace": "azure-conv"}, "but trace sets its own: drop output_spread"),
        ({"output_spread": 0.5, "multiturn": True}, "but multiturn sets its own: drop output_spread"),
    ],
)
def test_a_bad_spread_is_one_line_naming_the_field(kw, phrase):
    with pytest.raises(SpecError) as e:
        Workload(**kw).validate()
    assert phrase in str(e.value) and "\n" not in str(e.value)
    assert Workload(output_spread=0.5, dataset="d.json").validate().output_spread == 0.5  # an answer length is ours
