"""Bad input: one line naming what to fix, exit status 2, no traceback, nothing started."""

import subprocess
import sys

import pytest


def kvtune(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "KVTUNE_CACHE": str(cwd / "cache"), "COLUMNS": "400"},
    )


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--target", "ttft<1"], "needs a time unit"),
        (["--target", "latency<1s"], "unknown metric 'latency'"),
        (["--target", "ttft<1s", "--target", "ttft>2s"], "contradict"),
        (["--model", "/nonexistent/model.gguf"], "does not exist"),
        (["--backend", "tgi"], "unknown backend 'tgi'"),
        (["--set", "llama_server=/nonexistent/llama-server"], "not an executable file"),
        (["--study-file", "/nonexistent.yaml"], "does not exist"),
        (["--trials", "0"], "trials must be at least 1"),
        (["--objective", "speed"], "unknown objective"),
        (["--concurrency", "0"], "concurrency must be at least 1"),
        (["--set", "price_per_hour=-1"], "price_per_hour must be a positive price"),
        (["--set", "price_per_hour=abc"], "price_per_hour must be a price in USD per hour"),
        (["--set", "price_per_hour=2.5", "--set", "price_per_gpu_hour=1"], "give one price"),
        (["--objective", "cost_per_mtok"], "the cost_per_mtok objective needs a price"),
        (["--progress", "nosuch"], "--progress must be one of auto, plain, quiet, jsonl"),
        (["--set", "startup_timeout_s=0"], "startup_timeout_s 0 must be more than zero"),
        (["--set", "startup_stall_s=soon"], "startup_stall_s 'soon' is not a duration"),
        (["--set", "workload.turns=3"], "workload.turns applies to multi-turn only"),
        (["--workload", "multiturn", "--set", "workload.turns=0"], "workload.turns must be at least 1, got 0"),
        (
            ["--workload", "multiturn", "--set", "workload.think_spread=0.5"],
            "draws think times around think_time_s, which is 0",
        ),
        (["--workload", "chat"], "--workload takes multiturn or trace:FILE"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, fragment):
    r = kvtune("run", "--runs-dir", str(tmp_path / "runs"), *args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("kvtune: error:")
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists()  # nothing was started or created


def test_not_a_gguf_file(tmp_path):
    f = tmp_path / "model.gguf"
    f.write_text("not a model")
    r = kvtune("run", "--model", str(f), cwd=tmp_path)
    assert r.returncode == 2 and "is not a GGUF file" in r.stderr


def test_help_says_bare_metric_means_p95(tmp_path):
    r = kvtune("run", "--help", cwd=tmp_path)
    assert r.returncode == 0
    assert "bare metric means p95" in " ".join(r.stdout.split())
