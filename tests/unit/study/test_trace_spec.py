"""The trace and SLO settings at the edge: `--workload trace:FILE`, the study file's keys, and the
flags laid over the file (typed once; a bad value is one line naming what to fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.cli.flag_values import trace_of
from kvtune.errors import SpecError
from kvtune.study.spec import build_spec
from kvtune.study.study_file import load_study_file


def test_workload_flag_takes_trace_file() -> None:
    assert trace_of("trace:azure-conv") == "azure-conv"
    assert trace_of("trace: /data/t.csv ") == "/data/t.csv"
    assert trace_of(None) is None
    for bad in ("trace:", "sharegpt:x.json", "azure-conv"):
        with pytest.raises(SpecError, match="--workload takes multiturn or trace:FILE"):
            trace_of(bad)


def test_study_file_keys_and_flags_over_them(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "slo: ttft<2s,tpot<100ms\n"
        "targets: ['slo_attainment>99%']\n"
        "workload:\n  trace: mooncake-conv\n  trace_speed: 4\n  trace_requests: 50\n  trace_window_s: 30\n"
    )
    data = load_study_file(f)
    over = {"workload": {"trace_length_scale": 0.25, "trace_max_tokens": 2048}}
    spec = build_spec(data, over)
    w = spec.workload
    assert (w.trace, w.trace_speed, w.trace_requests, w.trace_window_s) == ("mooncake-conv", 4, 50, 30)
    # a slot holds the clip and the chat template's allowance
    assert (w.trace_length_scale, w.trace_max_tokens, w.request_tokens) == (0.25, 2048, 2048 + w.template_tokens)
    assert spec.slo is not None and [lim.metric for lim in spec.slo.limits] == ["ttft", "tpot"]
    assert build_spec(data, {"slo": "e2el<5s"}).slo.text == "e2el<5s"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("yaml", "needle"),
    [
        ("workload:\n  trace: 3\n", "workload.trace must be a file path"),
        ("workload:\n  trace: azure-conv\n  trace_speed: fast\n", "workload.trace_speed must be a number"),
        ("workload:\n  trace_requests: 5\n", "applies to a trace only"),
        ("slo: 2\n", "slo must be per-request SLOs"),
    ],
)
def test_bad_study_file_values_are_one_line(tmp_path: Path, yaml: str, needle: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml)
    with pytest.raises(SpecError, match=needle):
        build_spec(load_study_file(f))


def test_multiturn_flag_and_study_file_keys(tmp_path: Path) -> None:
    assert trace_of("multiturn") is None  # --workload multiturn names no trace
    f = tmp_path / "m.yaml"
    f.write_text("workload:\n  multiturn: true\n  turns: 6\n  think_time_s: 1.5\n  conversation_max_tokens: 3000\n")
    spec = build_spec(load_study_file(f), {"workload": {"turns": 3}})
    w = spec.workload
    assert (w.multiturn, w.turns, w.think_time_s, w.request_tokens) == (True, 3, 1.5, 3000)
    f.write_text("workload:\n  multiturn: 'yes'\n")
    with pytest.raises(SpecError, match="workload.multiturn must be true or false, got 'yes'"):
        load_study_file(f)
