"""A trace study's replay sized to this host before its first trial (tuner/trace_fit.py), with a
fake speed probe and a fake launcher: the lengths scaled when the replay asks more than a trial
answers, the slot sizes the space offers following them, the scale kept when the study resumes,
the user's own scale left alone, and a failed probe said in the header."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtune.bench.trace_demand import HostSpeed
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import open_tuner, prepare
from kvtune.tuner.events import Callbacks
from kvtune.tuner.host_speed import ProbeFailed
from kvtune.tuner.session import RunOptions, open_session
from kvtune.tuner.store.storage import sqlite_url
from kvtune.tuner.trace_fit import HostFitter, length_scale_given
from kvtune.workload import Workload

SLOW = HostSpeed(prefill_s_per_token=0.004, decode_s_per_token=0.025, probe_prompt_tokens=1024)  # a 2-core CPU
FAST = HostSpeed(prefill_s_per_token=1e-5, decode_s_per_token=1e-3, probe_prompt_tokens=1024)  # a GPU


class SlotLauncher(FakeLauncher):
    """Offers one knob sized from the workload, as llama-server's per-slot context is."""

    def default_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        return [Knob("ctx-per-slot", "choices", choices=(workload.request_tokens,))]


class Probes:
    """A fake probe: answers `speed` (or raises `error`) and counts its calls."""

    def __init__(self, speed: HostSpeed | None = None, error: str | None = None):
        self.speed, self.error, self.calls = speed, error, 0

    def __call__(self, launcher, spec, folder: Path) -> HostSpeed:
        self.calls += 1
        if self.error:
            raise ProbeFailed(self.error)
        assert self.speed is not None
        return self.speed


def trace_spec(**workload) -> StudySpec:
    return StudySpec(study="t", trials=2, workload=Workload(trace="mooncake-conv", **workload)).validate()


def fitter(probe: Probes) -> HostFitter:
    return HostFitter(storage_url=sqlite_url, probe=probe)


def test_a_slow_host_scales_the_lengths_and_the_slot_follows(tmp_path):
    probe = Probes(SLOW)
    plain = prepare(trace_spec(), launcher=SlotLauncher(context_length=8192), runs_dir=str(tmp_path / "a"))
    p = prepare(
        trace_spec(), launcher=SlotLauncher(context_length=8192), runs_dir=str(tmp_path / "b"), fit_trace=fitter(probe)
    )
    assert probe.calls == 1
    fit = p.host_fit.fit
    assert fit is not None and fit.scaled and fit.fitted_s <= fit.budget_s < fit.asked_s
    assert p.spec.workload.trace_length_scale == fit.scale < 0.1
    assert p.trace_sizing.max_tokens < plain.trace_sizing.max_tokens  # the clip is the scaled trace's p99
    assert p.space.knobs[0].choices == (p.spec.workload.request_tokens,)  # offered from the fitted workload
    assert p.space.knobs[0].choices != plain.space.knobs[0].choices
    assert p.study_name == plain.study_name  # the name is of the words given
    assert json.loads((p.run_dir / "host-speed" / "fit.json").read_text())["scale"] == fit.scale
    assert f"lengths scaled by {fit.scale:g}" in p.host_fit.describe()


def test_a_fast_host_replays_the_recorded_lengths(tmp_path):
    p = prepare(
        trace_spec(), launcher=SlotLauncher(context_length=8192), runs_dir=str(tmp_path), fit_trace=fitter(Probes(FAST))
    )
    assert p.spec.workload.trace_length_scale == 1.0 and not p.host_fit.fit.scaled
    assert p.host_fit.describe().endswith("replayed at the recorded lengths")


def test_a_failed_probe_leaves_the_trace_as_sized_and_says_why(tmp_path):
    p = prepare(
        trace_spec(),
        launcher=SlotLauncher(context_length=8192),
        runs_dir=str(tmp_path),
        fit_trace=fitter(Probes(error="the server's defaults did not start (out of memory)")),
    )
    assert p.spec.workload.trace_length_scale == 1.0
    assert p.host_fit.describe() == (
        "this host's speed was not measured (the server's defaults did not start (out of memory)): "
        "the trace replays as sized"
    )


def test_a_resumed_study_keeps_its_scale_without_a_probe(tmp_path):
    first = prepare(
        trace_spec(), launcher=SlotLauncher(context_length=8192), runs_dir=str(tmp_path), fit_trace=fitter(Probes(SLOW))
    )
    open_tuner(first)  # stores the study, its spec with the fitted scale
    again = Probes(FAST)  # would keep the recorded lengths if it were asked
    p = prepare(
        trace_spec(), launcher=SlotLauncher(context_length=8192), runs_dir=str(tmp_path), fit_trace=fitter(again)
    )
    assert again.calls == 0
    assert p.spec.workload.trace_length_scale == first.spec.workload.trace_length_scale < 1
    assert p.spec.workload.trace_max_tokens == first.spec.workload.trace_max_tokens
    assert (
        p.host_fit.describe()
        == f"resumed: lengths scaled by {first.spec.workload.trace_length_scale:g} as the study was started"
    )


def test_a_workload_without_a_trace_is_never_probed(tmp_path):
    probe = Probes(SLOW)
    spec = StudySpec(study="n", trials=2, workload=Workload(concurrency=2)).validate()
    p = prepare(spec, launcher=SlotLauncher(context_length=8192), runs_dir=str(tmp_path), fit_trace=fitter(probe))
    assert probe.calls == 0 and p.host_fit is None


@pytest.mark.parametrize(
    ("file_data", "flag", "given"),
    [
        ({}, None, False),
        ({"workload": {"trace": "azure-conv"}}, None, False),
        ({}, 1.0, True),  # the flag, even at 1: the recorded lengths on purpose
        ({"workload": {"trace_length_scale": 0.5}}, None, True),
    ],
)
def test_the_users_own_length_scale_is_theirs(file_data, flag, given):
    assert length_scale_given(file_data, flag) is given


def test_a_run_with_its_own_length_scale_starts_no_probe(tmp_path):
    probe = Probes(SLOW)
    overrides = {"workload": {"trace_length_scale": 1.0}}
    opts = RunOptions(runs_dir=str(tmp_path), given=overrides)
    session = open_session(
        opts, trace_spec(trace_length_scale=1.0), Callbacks(), launcher=FakeLauncher(context_length=8192), probe=probe
    )
    assert probe.calls == 0 and session.prepared.host_fit is None
    probed = Probes(SLOW)
    session = open_session(
        RunOptions(runs_dir=str(tmp_path / "b")),
        trace_spec(),
        Callbacks(),
        launcher=FakeLauncher(context_length=8192),
        probe=probed,
    )
    assert probed.calls == 1 and session.prepared.spec.workload.trace_length_scale < 1
