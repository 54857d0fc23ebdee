"""Issue 22 §4: sequential decisions on paired measurements; a tie goes to the simpler config."""

from __future__ import annotations

import math

import pytest

from kvtune.kinds import Direction
from kvtune.objectives.decisions import PairCall, decide, paired_interval, tie_break
from kvtune.objectives.noise import PRIOR, Noise

NOISE = Noise(0.03, 8)  # t95(8) = 2.306


def test_few_pairs_use_the_pooled_noise():
    iv = paired_interval([(110.0, 100.0)], NOISE)
    half = 2.306 * 0.03 * math.sqrt(2)
    assert iv.mean == pytest.approx(math.log(1.1))
    assert (iv.low, iv.high) == (pytest.approx(iv.mean - half), pytest.approx(iv.mean + half))
    assert iv.dof == 8 and iv.source == "pooled noise 3.0%, 8 dof"
    two = paired_interval([(110.0, 100.0), (108.0, 100.0)], NOISE)
    assert two.high - two.low == pytest.approx(2 * 2.306 * 0.03 * math.sqrt(2 / 2))


def test_many_pairs_use_their_own_spread():
    pairs = [(100.0 * math.exp(d), 100.0) for d in (0.10, 0.12, 0.08, 0.11)]  # 3 dof >= prior's 0
    iv = paired_interval(pairs, PRIOR)
    d = [0.10, 0.12, 0.08, 0.11]
    mean = sum(d) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 3)
    assert iv.mean == pytest.approx(mean) and iv.dof == 3 and iv.source == "4 pairs' own spread"
    assert iv.high - iv.low == pytest.approx(2 * 3.182 * sd / 2)


def test_decide_names_the_side_the_interval_favours():
    assert decide([(120.0, 100.0)], "maximize", cap=4, noise=NOISE)[0] is PairCall.LEADER
    assert decide([(100.0, 120.0)], "maximize", cap=4, noise=NOISE)[0] is PairCall.RIVAL
    # latencies: lower is better, so the leader's smaller value wins
    assert decide([(80.0, 100.0)], Direction.MINIMIZE, cap=4, noise=NOISE)[0] is PairCall.LEADER
    assert decide([(120.0, 100.0)], Direction.MINIMIZE, cap=4, noise=NOISE)[0] is PairCall.RIVAL


def test_overlap_means_another_pair_until_the_cap_then_a_tie():
    pairs = [(103.0, 100.0), (101.0, 100.0)]
    verdict, iv = decide(pairs[:1], "maximize", cap=2, noise=NOISE)
    assert verdict is PairCall.UNDECIDED and iv.low < 0 < iv.high
    assert decide(pairs, "maximize", cap=2, noise=NOISE)[0] is PairCall.TIE
    assert PairCall.UNDECIDED.value == "undecided: measure another pair"


def test_a_tie_goes_to_fewer_flags_changed_from_the_defaults():
    assert tie_break(leader_changed=3, rival_changed=1) is PairCall.RIVAL
    assert tie_break(leader_changed=1, rival_changed=1) is PairCall.LEADER  # equal: the better mean
    assert tie_break(leader_changed=0, rival_changed=2) is PairCall.LEADER


def test_bad_input():
    with pytest.raises(ValueError):
        paired_interval([], NOISE)
    with pytest.raises(ValueError):
        paired_interval([(math.inf, 100.0)], NOISE)
    with pytest.raises(ValueError):
        decide([(1.0, 1.0)], "maximize", cap=0)


def test_ratio_text_reads_as_percent():
    iv = paired_interval([(110.0, 100.0)], NOISE)
    assert iv.ratio_text().startswith("+10.0% [")
