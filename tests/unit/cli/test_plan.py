"""`kvtune plan` through the CLI: the seeds' figures, from flags and from the demo GGUF."""

import json
import subprocess
import sys

import pytest

SEED = ["--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--weights", "15GiB",
        "--reserve", "2GiB", "--memory", "24GiB", "--context", "8192"]


def plan(*args):
    return subprocess.run([sys.executable, "-m", "kvtune.cli", "plan", *args], capture_output=True,
                          text=True, timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_seed_figures_as_json():
    r = plan(*SEED, "--bandwidth", "1TB/s", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    f16 = next(c for c in d["caches"] if c["cache_type"] == "f16")
    assert f16["bytes_per_token"] == 131072 and f16["bytes_per_sequence"] == 2**30
    assert f16["sequences_fit"] == 7
    assert 55 < d["decode_ceiling_weights_only_tok_s"] < 70


def test_text_output_and_slots():
    r = plan("--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "32768",
             "--parallel", "4", "--memory", "24GiB")
    assert r.returncode == 0, r.stderr
    assert "128.00 KiB" in r.stdout and "8192 tokens per slot" in r.stdout


@pytest.mark.parametrize("args,fragment", [
    (["--layers", "32"], "missing --kv-heads, --head-dim"),
    ([*SEED[:6], "--memory", "lots"], "memory"),
    (["--model", "/nonexistent"], "does not exist"),
])
def test_bad_input(args, fragment):
    r = plan(*args)
    assert r.returncode == 2 and fragment in r.stderr and r.stderr.count("\n") == 1
