"""The pure parts of benchmarks/fidelity_gate.py: the Wilson interval, and that the gate simulated
through kvtune's own comparison never refuses identical answers and always refuses corrupted ones."""

from __future__ import annotations

import random
import sys

import pytest

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import fidelity_gate as sim  # noqa: E402


def test_the_wilson_interval_holds_its_rate():
    lo, hi = sim.wilson(50, 100)
    assert lo < 0.5 < hi and lo == pytest.approx(0.4038, abs=1e-3)
    assert sim.wilson(0, 2000)[0] == 0.0 and sim.wilson(0, 0) == (0.0, 1.0)


def test_identical_answers_are_never_refused_and_corrupted_ones_always():
    pool = [f"p{i}" for i in range(20)]
    ref = [sim.answer(p, 0.0) for p in pool]
    rng = random.Random(1)
    assert sim.refusal_rate(ref, ref, 50, 8, rng) == 0
    assert sim.refusal_rate(ref, [sim.answer(p, 3.0) for p in pool], 50, 8, rng) == 50
