"""Every backend of a comparison replays a trace at the length scale the first backend's study
fitted (cli/multi.py `fitted_trace_scale`): read from the results that study just produced (in
memory, not read back from disk), none without a trace."""

from __future__ import annotations

from kvtune.cli.multi import fitted_trace_scale


def test_the_first_studys_scale_is_read_from_its_results():
    assert fitted_trace_scale({"spec": {"workload": {"trace": "mooncake-conv", "trace_length_scale": 0.014}}}) == 0.014


def test_no_trace_or_no_spec_is_no_scale():
    assert fitted_trace_scale({"spec": {"workload": {"concurrency": 8}}}) is None
    assert fitted_trace_scale({}) is None
