"""The pure parts of benchmarks/gpu_acceptance.sh: the tiny model it writes on the GPU machine
(its vocabulary sizes kvtune's prompts exactly; its shape is what the planner reads) and the
checks it reads from a finished study (benchmarks/gpu_checks.py), on made-up logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import gpu_checks  # noqa: E402
import gpu_tiny_model  # noqa: E402

from kvtune.bench.tokenizer import try_load_tokenizer  # noqa: E402
from kvtune.planner.kv import kv_bytes_per_sequence  # noqa: E402
from kvtune.planner.shape import shape_from_gguf  # noqa: E402


def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    gpu_tiny_model.write(path, layers=2, embd=64, heads=4, kv_heads=2, ff=128, ctx=2048, seed=0)
    return path


def test_the_tiny_vocabulary_has_500_single_token_words_and_exact_prompts(tmp_path):
    tok, note = try_load_tokenizer(str(tiny(tmp_path)))
    assert tok is not None and "exact" in note
    words = tok.single_token_words()
    assert len(words) == 500
    assert tok.count(" ".join(words[:40])) == 40


def test_the_planner_reads_the_tiny_models_shape(tmp_path):
    shape = shape_from_gguf(tiny(tmp_path))
    assert (shape.layers, shape.attention_heads, shape.kv_heads, shape.head_dim) == (2, 4, 2, 16)
    assert shape.max_positions == 2048


def study(tmp_path: Path, model: Path, logged_mib: float, offloaded: str) -> Path:
    argv = ["llama-server", "--model", str(model), "--port", "1", "--parallel", "2", "--ctx-size", "1024"]
    argv += ["--n-gpu-layers", "99", "--cache-type-k", "q8_0"]
    log = tmp_path / "server.log"
    log.write_text(
        f"load_tensors: offloaded {offloaded} layers to GPU\n"
        f"llama_kv_cache: size = {logged_mib:8.2f} MiB (  512 cells,   2 layers,  2/2 seqs)\n"
    )
    trial = {"number": 0, "argv": argv, "launched": True, "startup_s": 1.0, "log_path": str(log), "feasible": True}
    trial["server_facts"] = {"slots": 2, "ctx_per_slot": 512, "kv_unified": False}
    results = {
        "spec": {"model": str(model)},
        "trials": [trial],
        "fidelity": {"state": "on", "target": "kld<0.01", "probed": 1, "refused": []},
        "best_trial": 0,
        "named_best": {"trial": 0},
        "verdict": "found",
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    return path


def planned_mib(model: Path) -> float:
    return kv_bytes_per_sequence(shape_from_gguf(model), 1024, ("q8_0", "f16")) / 2**20


def run_checks(capsys, *args: str) -> list[str]:
    sys.argv = ["gpu_checks.py", *args]
    gpu_checks.main()
    return [line for line in capsys.readouterr().out.splitlines() if line.split(":")[0] in ("PASS", "FAIL", "SKIP")]


def test_kv_and_offload_within_tolerance_pass_and_a_5_percent_miss_fails(tmp_path, capsys):
    model = tiny(tmp_path)
    smi = tmp_path / "smi.log"
    smi.write_text("1.0 total 500\n2.0 app 11, 300\n3.0 total 800\n4.0 app 12, 300\n5.0 total 500\n")
    lines = run_checks(capsys, str(study(tmp_path, model, planned_mib(model), "3/3")), "--mode", "gpu",
                       "--nvidia-smi-log", str(smi), "--idle-mib", "500")  # fmt: skip
    assert all(line.startswith("PASS") for line in lines), lines
    lines = run_checks(capsys, str(study(tmp_path, model, planned_mib(model) * 1.05, "2/3")), "--mode", "cpu")
    assert [line.split(":")[0] for line in lines] == ["PASS", "FAIL", "SKIP", "SKIP", "PASS", "PASS"], lines


def test_memory_still_held_when_the_next_server_starts_fails(tmp_path):
    smi = tmp_path / "smi.log"
    smi.write_text("1.0 app 11, 300\n1.0 total 800\n2.0 app 11, 300\n2.0 app 12, 300\n3.0 total 500\n")
    assert gpu_checks.memory_check(smi, 500).startswith("FAIL: GPU memory released after every trial (pid 11")
    smi.write_text("1.0 app 11, 300\n1.0 total 800\n3.0 total 900\n")
    assert "memory not back to idle" in gpu_checks.memory_check(smi, 500)


def test_without_a_process_list_the_card_must_fall_back_to_idle_once_per_server(tmp_path):
    smi = tmp_path / "smi.log"
    smi.write_text("1 total 500\n2 total 900\n3 total 510\n4 total 900\n5 total 505\n")
    assert gpu_checks.memory_check(smi, 500, 2).startswith("PASS")
    smi.write_text("1 total 500\n2 total 900\n3 total 900\n4 total 505\n")
    assert "fewer falls back to idle" in gpu_checks.memory_check(smi, 500, 2)
