"""The verification script against a real llama-server: a priced study of the demo model, the
deployed server started from its own launch script, and `verify-best.sh` run against it: exit 0
with the study's loose target, non-zero with an impossible one.

The study is the baseline alone (--trials 1, no confirmation): what is checked is the script, not
the search. The impossible target comes from a copy of the study whose results.json asks for a
TTFT p95 under 1 ms (no server answers that fast), exported the same way.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvtune.launchers.process import ServerProcess, free_port

pytestmark = pytest.mark.e2e
KVTUNE = [sys.executable, "-m", "kvtune.cli"]


def _kvtune(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*KVTUNE, *args], cwd=cwd, capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"}
    )


def _verify(script: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "KVTUNE": shlex.join(KVTUNE), "COLUMNS": "200"},
    )


def test_verify_script_passes_a_loose_target_and_fails_an_impossible_one(tmp_path: Path, llama_server: str) -> None:
    runs = tmp_path / "runs"
    r = _kvtune(
        "run",
        "--study",
        "verify",
        "--runs-dir",
        str(runs),
        "--llama-server",
        llama_server,
        "--trials",
        "1",
        "--confirm-top",
        "0",
        "--no-informed-start",
        "--target",
        "ttft<120s",
        "--concurrency",
        "2",
        "--prompt-tokens",
        "64",
        "--output-tokens",
        "16",
        "--num-requests",
        "4",
        "--warmup-requests",
        "1",
        "--price-per-hour",
        "2.50",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    study = runs / "verify"
    results = json.loads((study / "results.json").read_text())
    best = results["trials"][results["best_trial"]]["metrics"]
    assert best["cost_per_mtok"] == pytest.approx(2.5 / (best["output_throughput"] * 3600) * 1e6)
    assert "cost at $2.5/hour: best $" in r.stdout
    energy = results["cost_energy"]["summary"][-1]
    assert energy.startswith("energy: ")  # measured, or said to be not measurable: never estimated
    assert energy in r.stdout
    assert (study / "verify-best.sh").is_file()

    port = free_port()
    launch, loose = tmp_path / "launch.sh", tmp_path / "verify.sh"
    for fmt, out in (("bash", launch), ("bench", loose)):
        e = _kvtune("export", str(study), "--format", fmt, "--port", str(port), "-o", str(out), cwd=tmp_path)
        assert e.returncode == 0, e.stderr
    strict_dir = tmp_path / "strict"
    shutil.copytree(study, strict_dir, ignore=shutil.ignore_patterns("trials", "*.db"))
    strict_results = dict(results, spec={**results["spec"], "targets": ["ttft<1ms"]})
    (strict_dir / "results.json").write_text(json.dumps(strict_results))
    strict = tmp_path / "verify-strict.sh"
    e = _kvtune("export", str(strict_dir), "--format", "bench", "--port", str(port), "-o", str(strict), cwd=tmp_path)
    assert e.returncode == 0, e.stderr

    server = ServerProcess(argv=["bash", str(launch)], env={}, log_path=tmp_path / "server.log", port=port)
    server.start()
    try:
        server.wait_ready(180)
        held = _verify(loose)
        missed = _verify(strict)
    finally:
        server.stop()
    assert held.returncode == 0, held.stdout + held.stderr
    assert "vllm bench serve" in held.stdout and "target ttft_p95<120000ms: met" in held.stdout
    # the demo GGUF's stem is what the server serves; vLLM tokenizes with the demo's HF id
    assert "--model SmolLM2-135M-Instruct.Q4_1 --tokenizer HuggingFaceTB/SmolLM2-135M-Instruct" in held.stdout
    assert "target error_rate<1%: met" in held.stdout
    assert missed.returncode == 1, missed.stdout + missed.stderr
    assert "targets missed: ttft_p95<1ms" in missed.stdout
