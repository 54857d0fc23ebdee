"""`kvtune run` end to end against the real llama-server and the demo model.

A small workload keeps each trial to a few seconds; the studies still launch the real server,
stream real completions and store real Optuna studies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from kvtune.artifacts.launch_script import parse_exec_argv
from kvtune.launchers.models import demo_model_path
from kvtune.launchers.process import free_port
from tests.conftest import launched_script

pytestmark = pytest.mark.e2e
SMALL = [
    "--concurrency",
    "2",
    "--prompt-tokens",
    "32",
    "--output-tokens",
    "8",
    "--set",
    "workload.num_requests=4",
    "--set",
    "workload.warmup_requests=1",
    # the verdict runs as a user's study runs it, bounded to 3 pairs to keep the tests short
    "--set",
    "confirm_pairs=3",
]


def kvtune(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def generous(tmp_path_factory, llama_server):
    """One study with a target every config meets; shared by the tests below."""
    d = tmp_path_factory.mktemp("generous")
    port = free_port()
    r = kvtune(
        "run",
        "--trials",
        "3",
        "--target",
        "ttft<60s",
        "--study",
        "ok",
        "--runs-dir",
        str(d),
        "--set",
        "deploy_port=" + str(port),
        *SMALL,
        cwd=d,
    )
    return r, d / "ok", port


def test_generous_target_gives_a_best_command(generous):
    r, run_dir, _ = generous
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Best feasible config" in r.stdout and "Best command line:" in r.stdout
    # the best against the baseline, or (when no change beat them) the defaults named as best
    assert "vs baseline" in r.stdout or "The server's defaults were best" in r.stdout
    results = json.loads((run_dir / "results.json").read_text())
    assert results["baseline_trial"] == 0 and results["trials"][0]["baseline"]
    assert len(results["trials"]) == 3
    assert (run_dir / "launch-best.sh").exists()
    for t in results["trials"]:
        if t["launched"]:
            assert Path(t["log_path"]).exists()  # the server log is kept beside the results


def test_launch_script_runs_exactly_the_winning_argv(generous):
    r, run_dir, port = generous
    results = json.loads((run_dir / "results.json").read_text())
    best = next(t for t in results["trials"] if t["number"] == results["best_trial"])
    script_argv = parse_exec_argv((run_dir / "launch-best.sh").read_text())
    trial_argv = list(best["argv"])
    i = trial_argv.index("--port")
    trial_argv[i + 1] = str(port)  # tuning ran on a free port; deployment on --deploy-port
    assert script_argv == trial_argv
    assert script_argv == results["best_argv"]


def test_launch_script_serves_a_completion(generous):
    r, run_dir, port = generous
    with launched_script(run_dir / "launch-best.sh", port, 120):
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            timeout=60,
            json={"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8},
        )
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["message"]["content"]


def test_resuming_a_finished_study_runs_nothing_new(generous, tmp_path):
    r, run_dir, port = generous
    again = kvtune(
        "run",
        "--trials",
        "3",
        "--target",
        "ttft<60s",
        "--study",
        "ok",
        "--runs-dir",
        str(run_dir.parent),
        "--set",
        "deploy_port=" + str(port),
        *SMALL,
        cwd=tmp_path,
    )
    assert again.returncode == 0
    assert "resuming: 3 measured trial(s) kept" in again.stdout
    assert "starting server" not in again.stdout


def test_impossible_target_says_no_feasible_config(tmp_path, llama_server):
    r = kvtune(
        "run",
        "--trials",
        "2",
        "--target",
        "ttft<1ms",
        "--study",
        "nope",
        "--runs-dir",
        str(tmp_path),
        *SMALL,
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "No feasible config" in r.stdout
    assert "Nearest misses" in r.stdout and "breaks ttft<1ms" in r.stdout
    assert not (tmp_path / "nope" / "launch-best.sh").exists()


def test_a_flag_the_build_lacks_is_refused_before_any_launch(tmp_path, llama_server):
    """The study file's flags are checked against this llama-server's --help: a typo, or vLLM's
    spelling, costs a second and one line, not a study of failed launches."""
    study = tmp_path / "bad.yaml"
    study.write_text("space:\n  max-num-seqs: [2, 4]\n  parallel: [1, 2]\n")
    r = kvtune("run", "--study-file", str(study), "--study", "bad", "--runs-dir", str(tmp_path), *SMALL, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line
    assert "space.max-num-seqs: llama-server has no --max-num-seqs" in line
    assert "counterpart is parallel" in line
    assert not (tmp_path / "bad").exists()  # nothing written, no server started


def test_a_flag_the_server_fails_on_is_an_infeasible_trial(tmp_path, llama_server):
    """A flag the build has, with a value it cannot start with (a LoRA adapter that is not
    there): the launch fails, the trial is infeasible with the server's reason, the study goes on."""
    study = tmp_path / "bad.yaml"
    study.write_text(f"space:\n  lora: {tmp_path / 'no-such-adapter.gguf'}\n  parallel: [1, 2]\n")
    r = kvtune(
        "run",
        "--study-file",
        str(study),
        "--trials",
        "3",
        "--study",
        "bad",
        "--runs-dir",
        str(tmp_path),
        *SMALL,
        cwd=tmp_path,
    )
    results = json.loads((tmp_path / "bad" / "results.json").read_text())
    assert len(results["trials"]) == 3  # the study went on after the rejected launches
    rejected = [t for t in results["trials"] if not t["baseline"] and t["duplicate_of"] is None]
    assert rejected
    for t in rejected:
        assert not t["feasible"]
        assert t["reason"].startswith("server failed to start: exited with status")
    assert r.returncode == 0  # the baseline is feasible and wins
    assert "The server's defaults were best" in r.stdout


def test_demo_model_is_cached_and_verified():
    p = demo_model_path()
    assert p.stat().st_size == 98362432


def test_impossible_candidates_are_never_launched(tmp_path, llama_server):
    """Every candidate needs > 1M KV tokens of context: the planner proves none fits in RAM."""
    study = tmp_path / "huge.yaml"
    study.write_text("space:\n  ctx-per-slot: [1048576, 2097152]\n  parallel: [4, 8]\n")
    r = kvtune(
        "run",
        "--study-file",
        str(study),
        "--trials",
        "3",
        "--study",
        "huge",
        "--set",
        "confirm_top=0",
        "--runs-dir",
        str(tmp_path),
        *SMALL,
        cwd=tmp_path,
    )
    results = json.loads((tmp_path / "huge" / "results.json").read_text())
    others = [t for t in results["trials"] if not t["baseline"]]
    assert others and all(not t["launched"] for t in others)
    assert all(
        t["reason"].startswith("pre-screen: weights") and "> memory" in t["reason"]
        for t in others
        if t["duplicate_of"] is None
    )
    assert not (tmp_path / "huge" / "trials" / "0001").exists()
    assert results["launches_saved_by_prescreen"] >= 1
    assert "pre-screen skipped" in r.stdout
