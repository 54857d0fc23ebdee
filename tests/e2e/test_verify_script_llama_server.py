"""The verification script against a real llama-server: a study of the demo model, the deployed
server started from its own launch script, and the study's generated `verify-best.sh` run against
it: exit 0 when it checks what the study measured, non-zero with an impossible target.

The first study is priced and has targets and per-request SLOs (--slo, and a target on their
attainment): the script passes the SLO to `kvtune bench --slo`, checks slo_attainment, and prints
vLLM's --goodput from the SLO. The second replays a shipped trace without an SLO (issue 30: its
script checked `slo_attainment > 99%` and exited 1 on every server): the script replays the same
fitted trace and checks only the study's own target. Each study is the baseline alone (--trials 1,
no confirmation): what is checked is the script, not the search. The impossible target comes from
a copy of the first study whose results.json asks for a TTFT p95 under 1 ms (no server answers
that fast), exported the same way. The SLO's limits are loose (a 2-core box shared with others).

Every script runs as a new user would run it (issue 41): from a clean shell, `env -i
PATH=/usr/bin:/bin HOME=$HOME bash SCRIPT`, no venv on PATH and no KVTUNE: the verify script
finds the kvtune that wrote it (it failed with `exec: kvtune: not found`, 127). The first study
deploys on a free port (--deploy-port), so its own launch-best.sh starts the server and its own
verify-best.sh, run without arguments, measures it.
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


def _clean_shell(script: Path, *args: str) -> list[str]:
    """bash running `script` with nothing of this process's environment: no venv, no KVTUNE."""
    home = os.environ.get("HOME", "/")
    return ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", "COLUMNS=200", "bash", str(script), *args]


def _verify(script: Path, *url: str) -> subprocess.CompletedProcess:
    return subprocess.run(_clean_shell(script, *url), capture_output=True, text=True, timeout=600)


def _launch_script(study: Path, port: int, tmp_path: Path) -> Path:
    """The best config's launch script, exported to serve on `port`."""
    launch = tmp_path / f"launch-{study.name}.sh"
    e = _kvtune("export", str(study), "--format", "bash", "--port", str(port), "-o", str(launch), cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    return launch


def _serve_and_verify(
    launch: Path, port: int, tmp_path: Path, *scripts: Path | tuple[Path]
) -> list[subprocess.CompletedProcess]:
    """Each verification script's run against the server `launch` starts (stopped after); a script
    given as (script,) is run without arguments (its default URL)."""
    server = ServerProcess(argv=_clean_shell(launch), env={}, log_path=tmp_path / "server.log", port=port)
    server.start()
    try:
        server.wait_ready(180)
        return [_verify(s[0]) if isinstance(s, tuple) else _verify(s, f"http://127.0.0.1:{port}") for s in scripts]
    finally:
        server.stop()


def test_verify_script_of_a_study_with_targets_and_an_slo_passes_and_an_impossible_target_fails(
    tmp_path: Path, llama_server: str
) -> None:
    runs, port = tmp_path / "runs", free_port()
    r = _kvtune(
        "run",
        "--study",
        "verify",
        "--runs-dir",
        str(runs),
        "--set",
        "llama_server=" + str(llama_server),
        "--trials",
        "1",
        "--set",
        "confirm_top=0",
        "--set",
        "informed_start=false",
        "--target",
        "ttft<120s",
        "--set",
        "slo=ttft<120s,tpot<10s",
        "--target",
        "slo_attainment>99%",
        "--concurrency",
        "2",
        "--prompt-tokens",
        "64",
        "--output-tokens",
        "16",
        "--set",
        "workload.num_requests=4",
        "--set",
        "workload.warmup_requests=1",
        "--set",
        "price_per_hour=2.50",
        "--set",
        "deploy_port=" + str(port),
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
    assert f"WROTE_IT=({shlex.quote(sys.executable)} -m kvtune.cli)" in (study / "verify-best.sh").read_text()
    assert f"Best command line:\n{results['best_command']}\n" in r.stdout  # the launch script's, on one line

    strict_dir = tmp_path / "strict"
    shutil.copytree(study, strict_dir, ignore=shutil.ignore_patterns("trials", "*.db"))
    strict_results = dict(results, spec={**results["spec"], "targets": ["ttft<1ms"]})
    (strict_dir / "results.json").write_text(json.dumps(strict_results))
    strict = tmp_path / "verify-strict.sh"
    e = _kvtune("export", str(strict_dir), "--format", "bench", "--port", str(port), "-o", str(strict), cwd=tmp_path)
    assert e.returncode == 0, e.stderr

    # the study's own scripts, as written: launch-best.sh serves on --deploy-port, verify-best.sh's default
    held, missed = _serve_and_verify(study / "launch-best.sh", port, tmp_path, (study / "verify-best.sh",), strict)
    assert held.returncode == 0, held.stdout + held.stderr
    assert "vllm bench serve" in held.stdout and "target ttft_p95<120000ms: met" in held.stdout
    # the demo GGUF's stem is what the server serves; vLLM tokenizes with the demo's HF id
    assert "--model SmolLM2-135M-Instruct.Q4_1 --tokenizer HuggingFaceTB/SmolLM2-135M-Instruct" in held.stdout
    assert "target error_rate<1%: met" in held.stdout
    assert "target slo_attainment>99%: met (100.0%)" in held.stdout  # measured with the study's SLO
    assert "--goodput ttft:120000 tpot:10000 --base-url" in held.stdout  # vLLM's goodput: the SLO
    assert missed.returncode == 1, missed.stdout + missed.stderr
    assert "targets missed: ttft_p95<1ms" in missed.stdout


def test_the_verify_script_of_a_trace_study_without_an_slo_passes_on_the_best_configs_server(
    tmp_path: Path, llama_server: str
) -> None:
    runs = tmp_path / "runs"
    r = _kvtune(
        "run",
        "--study",
        "trace",
        "--runs-dir",
        str(runs),
        "--set",
        "llama_server=" + str(llama_server),
        "--trials",
        "1",
        "--set",
        "confirm_top=0",
        "--set",
        "informed_start=false",
        "--workload",
        "trace:azure-conv",
        "--set",
        "workload.trace_length_scale=0.25",
        "--set",
        "workload.trace_speed=4",
        "--concurrency",
        "2",
        "--set",
        "workload.num_requests=4",
        "--set",
        "workload.warmup_requests=1",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    study = runs / "trace"
    verify = study / "verify-best.sh"
    text = verify.read_text()
    bench = shlex.split(next(line for line in text.splitlines() if line.startswith("exec ")))
    assert "slo_attainment" not in text and "--slo" not in bench  # the study had no SLO
    assert bench[bench.index("--workload") + 1] == "trace:azure-conv" and any(
        a.startswith("workload.trace_max_tokens=") for a in bench
    )  # its fit
    port = free_port()
    [held] = _serve_and_verify(_launch_script(study, port, tmp_path), port, tmp_path, verify)
    assert held.returncode == 0, held.stdout + held.stderr
    assert "target error_rate<1%: met" in held.stdout and "slo_attainment" not in held.stdout
    assert "--dataset-name timed_trace" in held.stdout and "--goodput" not in held.stdout
