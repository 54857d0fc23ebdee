"""`kvtune plan` through the CLI: the seeds' figures, from flags and from the demo GGUF."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvtune

SRC = str(Path(kvtune.__file__).parents[1])  # this checkout's sources, not an installed copy

SEED = [
    "--layers",
    "32",
    "--kv-heads",
    "8",
    "--head-dim",
    "128",
    "--weights",
    "15GiB",
    "--reserve",
    "2GiB",
    "--memory",
    "24GiB",
    "--context",
    "8192",
]


def plan(*args):
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "plan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": SRC},
    )


def test_seed_figures_as_json():
    r = plan(*SEED, "--bandwidth", "1TB/s", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    f16 = next(c for c in d["caches"] if c["cache_type"] == "f16")
    assert f16["bytes_per_token"] == 131072 and f16["bytes_per_sequence"] == 2**30
    assert f16["sequences_fit"] == 7
    assert 55 < d["decode_ceiling_weights_only_tok_s"] < 70


def test_text_output_and_slots():
    r = plan(
        "--layers",
        "32",
        "--kv-heads",
        "8",
        "--head-dim",
        "128",
        "--context",
        "32768",
        "--parallel",
        "4",
        "--memory",
        "24GiB",
    )
    assert r.returncode == 0, r.stderr
    assert "128.00 KiB" in r.stdout and "8192 tokens per slot" in r.stdout


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--layers", "32"], "missing --kv-heads, --head-dim"),
        ([*SEED[:6], "--memory", "lots"], "memory"),
        (["--model", "/nonexistent"], "does not exist"),
    ],
)
def test_bad_input(args, fragment):
    r = plan(*args)
    assert r.returncode == 2 and fragment in r.stderr and r.stderr.count("\n") == 1


def test_plan_for_two_named_gpus_with_starting_flags():
    r = plan(*SEED[:6], "--context", "4096", "--users", "8", "--gpu", "H100 SXM", "--gpus", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["hardware"] == "2 x H100 SXM (spec sheet: 80 GiB, 3.35 TB/s each)"
    assert d["memory_bytes"] == 160 * 2**30 and d["hardware_bandwidth_bytes_s"] == pytest.approx(6.7e12)
    # the decode ceiling reads the one GPU the suggested --tensor-parallel-size 1 uses
    assert d["bandwidth_bytes_s"] == pytest.approx(3.35e12) and d["decode_ceiling_gpus"] == 1
    s = {x["backend"]: x for x in d["suggestions"]}
    assert s["vllm"]["flags"] == {
        "gpu-memory-utilization": 0.92,  # vLLM's own default (0.32 and 0.33), no vLLM read here
        "tensor-parallel-size": 1,
        "max-num-seqs": 8,
        "max-model-len": 4096,
        "kv-cache-dtype": "auto",
    }
    assert s["llama-server"]["argv"] == ["--parallel", "8", "--ctx-size", "32768", "--n-gpu-layers", "999"]
    text = plan(*SEED[:6], "--context", "4096", "--users", "8", "--gpu", "H100 SXM", "--gpus", "2")
    assert "memory: 2 x H100 SXM" in text.stdout
    assert "  vllm: --gpu-memory-utilization 0.92 --tensor-parallel-size 1 --max-num-seqs 8" in text.stdout


def test_plan_on_this_gpu_less_machine_suggests_cpu_flags():
    r = plan(*SEED[:6], "--context", "2048", "--users", "2", "--json")
    assert r.returncode == 0, r.stderr
    s = {x["backend"]: x for x in json.loads(r.stdout)["suggestions"]}
    assert "n-gpu-layers" not in s["llama-server"]["flags"] and "gpu-memory-utilization" not in s["vllm"]["flags"]


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--gpu", "nosuch"], "unknown GPU 'nosuch': use one of B300, B200, GH200 144GB,"),
        (["--gpu", "L4", "--gpus", "0"], "--gpus must be at least 1"),
        (["--gpus", "2"], "this machine has 0 GPU(s)"),
        (["--gpu", ""], "--gpu needs a GPU model"),
    ],
)
def test_bad_gpu_input(args, fragment):
    r = plan(*SEED[:6], *args)
    assert r.returncode == 2 and fragment in r.stderr and r.stderr.count("\n") == 1, r.stderr
