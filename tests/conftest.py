"""Shared fixtures: tiny workloads and a tuner built from the fake launcher (real processes,
real load client, real SQLite storage; only the model is fake)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.bench.workload import Workload
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.build import open_tuner, prepare
from kvtune.tuner.loop import Callbacks
from kvtune.tuner.spec import StudySpec

TINY = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1,
                request_timeout_s=10)


@pytest.fixture
def tiny_workload() -> Workload:
    return TINY


@pytest.fixture
def make_tuner(tmp_path: Path):
    """Build a Tuner over the fake launcher; returns (tuner, events)."""

    def build(spec: StudySpec | None = None, launcher: FakeLauncher | None = None, **spec_kw):
        spec = spec or StudySpec(study="t", trials=4, workload=TINY, startup_timeout_s=20,
                                 **spec_kw).validate()
        events: list = []
        cb = Callbacks(trial_finished=events.append)
        prepared = prepare(spec, launcher=launcher or FakeLauncher(), runs_dir=str(tmp_path / "runs"))
        return open_tuner(prepared, cb), events

    return build
