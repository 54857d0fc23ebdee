"""Every backend of a comparison replays a trace at the length scale the first backend's study
fitted (cli/multi.py `fitted_trace_scale`): read from its results.json, none without a trace."""

from __future__ import annotations

import json

from kvtune.cli.multi import fitted_trace_scale


def test_the_first_studys_scale_is_read_from_its_results(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(
        json.dumps({"spec": {"workload": {"trace": "mooncake-conv", "trace_length_scale": 0.014}}})
    )
    assert fitted_trace_scale(tmp_path / "a") == 0.014


def test_no_trace_or_no_results_is_no_scale(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text(json.dumps({"spec": {"workload": {"concurrency": 8}}}))
    assert fitted_trace_scale(tmp_path / "b") is None
    assert fitted_trace_scale(tmp_path / "missing") is None
