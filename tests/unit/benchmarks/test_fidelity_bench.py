"""The pure parts of benchmarks/fidelity.py: a row's figures and intervals from answers made by
the fake model, the markdown table and the probe's cost line (the real run needs llama-server)."""

from __future__ import annotations

import sys

import pytest

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import fidelity as fb  # noqa: E402

from kvtune.objectives.fidelity import Answer  # noqa: E402
from kvtune.testing.fake_openai import fake_answer  # noqa: E402


def answers(drift: float) -> list[Answer]:
    out = []
    for i in range(8):
        content = fake_answer(f"prompt {i}", 16, 5, drift)
        top = tuple(tuple((a["token"], a["logprob"]) for a in c["top_logprobs"]) for c in content)
        out.append(Answer(tuple(c["token"] for c in content), top))
    return out


def test_an_a_a_row_is_the_floor_and_passes():
    r = fb.row("A/A", True, answers(0.0), answers(0.0), 1.2)
    assert r.agreement == (1.0, 1.0, 1.0) and r.kld == (0.0, 0.0, 0.0) and not r.refused
    assert r.first_difference is None and r.identical == 1.0


def test_a_corrupted_cache_is_refused_with_its_intervals():
    r = fb.row("q4_0", False, answers(0.0), answers(6.0), 1.3)
    assert r.refused and r.kld[1] <= r.kld[0] <= r.kld[2] and r.kld_upper >= r.kld[0]
    text = fb.table([r])
    assert "| q4_0 |" in text and "refused" in text
    low, high = text.split("| q4_0 | ")[1].split("]")[0].split("[")[1].split(", ")
    assert 0 <= int(low) <= int(high) <= 100  # a share's interval held to [0, 100]


def test_the_interval_is_a_two_sided_t_interval():
    m, lo, hi = fb.interval([1.0, 2.0, 3.0])
    assert m == 2.0 and (hi - m) == pytest.approx(4.3027 * 1.0 / 3**0.5, rel=1e-3) and lo == pytest.approx(4 - hi)
    assert fb.interval([5.0]) == (5.0, 5.0, 5.0)


def test_the_cost_line_says_the_share_and_the_ratio_to_the_goal():
    assert "12.0% of a trial, over the 10% goal (ratio 1.20x the goal)" in fb.cost_line(1.2, 10.0)
    assert "within the 10% goal" in fb.cost_line(0.5, 10.0)
