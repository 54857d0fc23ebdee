"""The workload's distributions beyond lengths (issue 30 item 4): think times drawn, several
prefix groups, conversations starting open-loop. Their checks, words and saved form."""

from __future__ import annotations

import math

import pytest

from kvtune.errors import SpecError
from kvtune.study.study_file import parse_workload
from kvtune.workload import Workload


def test_open_loop_conversations_are_a_valid_workload_described_by_their_start_rate():
    w = Workload(multiturn=True, mode="open", rate=2.0, turns=4, num_requests=16).validate()
    assert w.describe() == (
        "4 conversations of 4 turns, conversations starting at 2/s (poisson), each turn carrying the "
        "history so far; 200 new prompt / 64 output tokens per turn"
    )
    timed = Workload(multiturn=True, mode="open", rate=0.5, arrival="gamma", burstiness=0.5, duration_s=60.0)
    assert "conversations starting at 0.5/s (gamma) for 60 s" in timed.validate().describe()
    assert Workload(**w.to_dict()) == w


def test_drawn_think_times_are_described_saved_and_left_out_at_zero():
    w = Workload(multiturn=True, think_time_s=2.0, think_spread=0.5).validate()
    p99 = math.exp(math.log(2.0) - 0.5**2 / 2 + 2.3263478740408408 * 0.5)
    assert f"think time ~lognormal(mean 2 s, sigma 0.5) up to {p99:.3g} s," in w.describe()
    assert w.to_dict()["think_spread"] == 0.5 and Workload(**w.to_dict()) == w
    assert "think_spread" not in Workload(multiturn=True).to_dict()  # a study's name as before


def test_prefix_groups_are_described_saved_and_left_out_at_one():
    w = Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=100, shared_prefix_groups=4).validate()
    assert w.describe().endswith(
        "; a 100-token system prompt shared by 50% of requests, in 4 groups (each group its own prompt)"
    )
    assert w.to_dict()["shared_prefix_groups"] == 4 and Workload(**w.to_dict()) == w
    assert "shared_prefix_groups" not in Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=100).to_dict()
    assert w.request_tokens == Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=100).request_tokens


@pytest.mark.parametrize(
    ("kw", "phrase"),
    [
        (
            {"multiturn": True, "think_time_s": 1.0, "think_spread": -0.5},
            "workload.think_spread must be a finite number >= 0",
        ),
        ({"multiturn": True, "think_time_s": 1.0, "think_spread": math.inf}, "workload.think_spread must be a finite"),
        (
            {"multiturn": True, "think_spread": 0.5},
            "draws think times around think_time_s, which is 0: set workload.think_time_s",
        ),
        ({"think_spread": 0.5}, "workload.think_spread applies to multi-turn only"),
        ({"shared_prefix_groups": 0}, "workload.shared_prefix_groups must be an integer >= 1"),
        ({"shared_prefix_groups": 2.5}, "workload.shared_prefix_groups must be an integer >= 1"),
        ({"shared_prefix_groups": 3}, "set workload.shared_prefix_fraction > 0 or drop"),
        ({"multiturn": True, "mode": "open", "rate": 1.0, "trace": "azure-conv"}, "drop rate"),
    ],
)
def test_a_bad_distribution_is_one_line_naming_the_value_and_the_fix(kw, phrase):
    with pytest.raises(SpecError) as e:
        Workload(**kw).validate()
    assert phrase in str(e.value) and "\n" not in str(e.value)


def test_the_study_file_takes_the_new_keys_and_checks_their_types():
    w = parse_workload(
        {"multiturn": True, "mode": "open", "rate": 2, "think_time_s": 1, "think_spread": 0.5, "duration_s": 30}
    )
    assert (w.mode, w.rate, w.think_spread, w.duration_s) == ("open", 2, 0.5, 30)
    g = parse_workload({"shared_prefix_fraction": 1.0, "shared_prefix_tokens": 64, "shared_prefix_groups": 3})
    assert g.shared_prefix_groups == 3
    for raw, phrase in (
        ({"shared_prefix_groups": "3"}, "workload.shared_prefix_groups must be an integer"),
        ({"multiturn": True, "think_time_s": 1, "think_spread": "wide"}, "workload.think_spread must be a number"),
    ):
        with pytest.raises(SpecError, match=phrase):
            parse_workload(raw)
