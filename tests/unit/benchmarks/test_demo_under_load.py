"""The pure parts of benchmarks/demo_under_load.py: a demo run's decision read from its
results.json and stored anchor, and whether two runs agree (the real runs need llama-server,
the demo model and a quiet machine: the lead runs them)."""

from __future__ import annotations

import sys

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import demo_under_load as demo  # noqa: E402


def results(kind: str, named: int | None, baseline_disturbed: bool = False) -> dict:
    return {
        "baseline_trial": 0,
        "verdict": {"kind": kind},
        "named_best": {"trial": named},
        "trials": [
            {"number": 0, "baseline": True, "candidate": {"flags": {}}, "disturbed": baseline_disturbed,
             "metrics": {"median_tpot_ms": 18.7}},
            {"number": 1, "candidate": {"flags": {"parallel": 2, "threads": None}}},
            {"number": 3, "candidate": {"flags": {"parallel": 1}}},
        ],
    }  # fmt: skip


def test_a_decision_is_the_verdict_kind_and_the_named_configs_tuned_flags():
    anchor = {"runs": [{"quiet": True}], "quiet": {"metrics": {"median_tpot_ms": 12.6}}}
    d = demo.decision("hog", results("MEETS_WHERE_DEFAULTS_MISS", 3, True), anchor, 300.0)
    assert (d.kind, d.flags, d.named, d.baseline_disturbed, d.anchor_runs) == (
        "MEETS_WHERE_DEFAULTS_MISS",
        {"parallel": 1},
        3,
        True,
        1,
    )
    assert "quiet re-measurement (median TPOT 12.6 ms)" in d.line() and "--parallel 1" in d.line()
    nothing = demo.decision("quiet", results("NOTHING_MEETS", None), {}, 200.0)
    assert nothing.flags == {} and "(server defaults)" in nothing.line()
    assert "first measurement (median TPOT 18.7 ms)" in nothing.anchor
    gave_up = demo.decision("hog", results("NOT_ENOUGH_EVIDENCE", None, True), {"gave_up": True, "runs": [{}, {}]}, 1.0)
    assert "verdict's paired runs" in gave_up.anchor and gave_up.anchor_runs == 2


def test_two_runs_agree_on_the_same_kind_and_flags_only():
    a = demo.decision("hog", results("MEETS_WHERE_DEFAULTS_MISS", 3, True), {}, 1.0)
    b = demo.decision("quiet", results("MEETS_WHERE_DEFAULTS_MISS", 3), {}, 1.0)
    text, status = demo.report(a, b)
    assert status == 0 and text.endswith("same decision: yes")
    c = demo.decision("quiet", results("MEETS_WHERE_DEFAULTS_MISS", 1), {}, 1.0)  # --parallel 2
    assert demo.report(a, c)[1] == 1
    d = demo.decision("quiet", results("NOTHING_MEETS", 3), {}, 1.0)
    text, status = demo.report(a, d)
    assert status == 1 and text.endswith("same decision: NO")
