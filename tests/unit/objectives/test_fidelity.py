"""The fidelity comparison (objectives/fidelity.py) on answers made by the fake model
(testing/fake_openai.py `fake_answer`): identical, slightly perturbed and corrupted numerics."""

from __future__ import annotations

import math

import pytest

from kvtune.errors import TargetError
from kvtune.objectives.fidelity import (
    UNPROBED,
    Answer,
    Fidelity,
    compare_answers,
    fidelity,
    position_kld,
    upper_bound,
)
from kvtune.objectives.targets import DEFAULT_FIDELITY_TARGET, parse_target, parse_targets, with_fidelity_target
from kvtune.testing.fake_openai import fake_answer

PROMPTS = [f"prompt number {i}: explain something" for i in range(12)]


def answer(prompt: str, drift: float = 0.0, tokens: int = 32, k: int = 5) -> Answer:
    content = fake_answer(prompt, tokens, k, drift)
    return Answer(
        tuple(c["token"] for c in content),
        tuple(tuple((a["token"], a["logprob"]) for a in c["top_logprobs"]) for c in content),
    )


def answers(drift: float) -> list[Answer]:
    return [answer(p, drift) for p in PROMPTS]


def test_identical_answers_sit_at_the_floor():
    f = fidelity(answers(0.0), answers(0.0))
    assert (f.kld, f.kld_upper, f.agreement, f.identical) == (0.0, 0.0, 1.0, 1.0)
    assert f.first_difference_median is None
    assert f.metrics()["kld_upper"] == 0.0


def test_a_small_drift_keeps_most_tokens_and_a_small_kl():
    f = fidelity(answers(0.0), answers(0.05))
    assert 0 < f.kld < 0.01 and f.kld <= f.kld_upper
    assert f.agreement > 0.5


def test_corrupted_numerics_part_early_and_show_a_large_kl():
    f = fidelity(answers(0.0), answers(6.0))
    assert f.kld > 0.1 and f.agreement < 0.5
    assert f.first_difference_median is not None and f.first_difference_median < 8
    assert not parse_target(DEFAULT_FIDELITY_TARGET).met(f.metrics())


def test_kl_grows_with_the_drift():
    ref = answers(0.0)
    klds = [fidelity(ref, answers(d)).kld for d in (0.0, 0.3, 1.0, 4.0)]
    assert klds == sorted(klds) and klds[0] == 0.0 < klds[-1]


def test_position_kld_of_a_distribution_with_itself_is_zero_and_never_negative():
    top = [("a", math.log(0.6)), ("b", math.log(0.3)), ("c", math.log(0.05))]
    assert position_kld(top, top) == pytest.approx(0.0, abs=1e-12)
    other = [("b", math.log(0.6)), ("a", math.log(0.3)), ("d", math.log(0.05))]
    kl = position_kld(top, other)
    # the exact KL over {a, b, c, rest} with c capped at the candidate's smallest listed 0.05
    want = 0.6 * math.log(0.6 / 0.3) + 0.3 * math.log(0.3 / 0.6) + 0.05 * math.log(0.05 / 0.05)
    want += 0.05 * math.log(0.05 / (1 - 0.3 - 0.6 - 0.05))
    assert kl == pytest.approx(want)
    assert position_kld(top, [("z", 0.0)]) > 10  # the candidate is sure of a word the reference never lists


def test_the_kl_is_taken_only_up_to_the_first_differing_token():
    ref = Answer(("a", "b", "c"), ((("a", -0.1),), (("b", -0.1),), (("c", -0.1),)))
    cand = Answer(("a", "x", "y"), ((("a", -0.1),), (("x", -0.1),), (("y", -5.0),)))
    c = compare_answers(ref, cand)
    assert (c.first_difference, c.aligned) == (1, 2)  # positions 0 and 1: the same prefix
    assert c.agreement == pytest.approx(1 / 3)


def test_an_answer_that_stops_early_differs_where_it_stopped():
    ref = Answer(("a", "b", "c"), ((("a", 0.0),),) * 3)
    c = compare_answers(ref, Answer(("a",), ((("a", 0.0),),)))
    assert c.first_difference == 1 and c.agreement == pytest.approx(1 / 3)


def test_the_upper_bound_is_a_one_sided_t_bound_of_the_mean():
    assert upper_bound([0.1]) == 0.1
    assert upper_bound([0.2, 0.2, 0.2]) == pytest.approx(0.2)
    xs = [0.01, 0.02, 0.03, 0.04]
    # t(0.95, 3) = 2.353; sd = 0.0129
    assert upper_bound(xs) == pytest.approx(0.025 + 2.3534 * 0.012910 / 2, rel=1e-3)


def test_fidelity_round_trips_through_json_an_infinite_kl_included():
    f = fidelity(answers(0.0), answers(1.0))
    assert Fidelity.from_dict(f.to_dict()) == f
    failed = {**f.to_dict(), "kld": None, "kld_upper": None}  # results.json writes inf as null
    assert math.isinf(Fidelity.from_dict(failed).kld_upper)
    assert Answer.from_dict(answers(0.0)[0].to_dict()).tokens == answers(0.0)[0].tokens


def test_unprobed_means_the_floor_and_says_why():
    assert UNPROBED.metrics()["kld_upper"] == 0.0
    assert "not probed" in UNPROBED.describe()


def test_mismatched_answer_lists_are_a_bug_not_a_figure():
    with pytest.raises(ValueError):
        fidelity(answers(0.0), answers(0.0)[:3])


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("kld<0", "positive bound"),
        ("kld<-1", "cannot parse"),
        ("kld>0.1", "upper bound"),
        ("kld<0.1ms", "without a unit"),
        ("kld<0.5x", "without a unit"),
    ],
)
def test_a_kld_target_that_cannot_work_is_refused_in_one_line(text, phrase):
    with pytest.raises(TargetError, match=phrase):
        parse_target(text)


def test_a_kld_target_reads_the_upper_bound_and_the_default_is_added_once():
    t = parse_target("kld<0.05")
    assert (t.key, t.fidelity, t.constraint_key) == ("kld_upper", True, "kld<0.05")
    assert t.met({"kld_upper": 0.04}) and not t.met({"kld_upper": 0.06}) and not t.met({})
    assert "95% upper bound" in t.describe()
    base = parse_targets(["ttft<1s"])
    gated = with_fidelity_target(base)
    assert [x.text for x in gated] == ["ttft<1s", DEFAULT_FIDELITY_TARGET]
    assert with_fidelity_target([*base, t])[-1] is t
