"""Worker slots, the stored spec, the hardware guard and warm starts.

Here the tests that start processes; the rest are in tests/unit/tuner/fleet/test_workers.py."""

import os
import sys

import pytest
import typer.main

from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.fleet.workers import WorkerOptions, worker_argv, worker_environment
from kvtune.tuner.search.warmstart import enqueue_warm_start
from tests.conftest import TINY


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--set", "gpus_per_trial=3", "--trials", "1"],
        ["run", "--workers", "3", "--set", "gpus_per_trial=1", "--trials", "1"],
        [
            "worker",
            "--storage",
            "sqlite:///nowhere.db",
            "--study",
            "x",
            "--slots",
            "2",
            "--slot",
            "1",
            "--gpus-per-trial",
            "2",
        ],
    ],
)
def test_the_cli_refuses_more_gpus_than_visible_before_anything_is_created(command, tmp_path):
    """Two GPUs visible: CUDA_VISIBLE_DEVICES=0,1 (the user's own setting) on this GPU-less host."""
    import subprocess
    from pathlib import Path

    import kvtune

    src = str(Path(kvtune.__file__).parents[1])
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            *command,
            *(["--runs-dir", str(tmp_path / "runs")] if command[0] == "run" else []),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": src,
            "CUDA_VISIBLE_DEVICES": "0,1",
            "KVTUNE_CACHE": str(tmp_path / "cache"),
            "COLUMNS": "400",
        },
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvtune: error: --gpus-per-trial") and "Traceback" not in r.stderr
    assert "2 GPU(s) visible (0, 1)" in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing created: no runs dir, no model download, no study


def _worker_params(argv: list[str]) -> dict:
    """What `kvtune worker` parses from this argv (click's parser, nothing is run)."""
    from kvtune import cli

    assert argv[:4] == [sys.executable, "-m", "kvtune.cli", "worker"]
    command = typer.main.get_command(cli.app).commands["worker"]
    return command.make_context("worker", argv[4:]).params


def test_worker_argv_is_what_the_worker_command_parses(monkeypatch):
    options = WorkerOptions(
        gpus_per_trial=2,
        runs_dir="/runs",
        llama_server="/bin/llama-server",
        vllm_python="/venv/bin/python",
        allow_mixed_hardware=True,
    )
    url = "postgresql://kvtune:s3cret@db-host/kvtune"
    argv = worker_argv("st", 1, 3, options)
    assert not any("s3cret" in a or "postgresql" in a for a in argv)  # the URL is in no command line
    env = worker_environment(url, {"PATH": "/bin"})
    assert env["KVTUNE_STORAGE"] == url and env["PATH"] == "/bin" and env["KVTUNE_FAMILY_PID"] == str(os.getpid())
    monkeypatch.setenv("KVTUNE_STORAGE", env["KVTUNE_STORAGE"])  # as the spawned worker sees it
    assert _worker_params(argv) == {
        "storage": url,
        "study": "st",
        "slot": 1,
        "slots": 3,
        "gpus_per_trial": 2,
        "runs_dir": "/runs",
        "llama_server": "/bin/llama-server",
        "vllm_python": "/venv/bin/python",
        "allow_mixed_hardware": True,
    }
    defaults = _worker_params(worker_argv("st", 2, 3, WorkerOptions()))
    assert defaults["slot"] == 2 and defaults["gpus_per_trial"] == 0 and defaults["allow_mixed_hardware"] is False
    assert defaults["runs_dir"] is defaults["llama_server"] is defaults["vllm_python"] is None


def test_warm_start_queues_the_source_best_first(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    src, _ = make_tuner(
        StudySpec(study="src", trials=4, workload=TINY, objective="ttft_p95", confirm_top=0).validate(), launcher
    )
    src.run()
    dst, _ = make_tuner(
        StudySpec(study="dst", trials=3, workload=TINY, objective="ttft_p95", confirm_top=0).validate(), launcher
    )
    labels = enqueue_warm_start(dst.study, src.study, dst.space.knobs, top=2)
    assert labels and labels[0].startswith("src#")
    outcomes = dst.run()
    assert outcomes[0].baseline
    assert outcomes[1].warm_start == labels[0]
    best_src = min((o for o in src.outcomes() if o.feasible and not o.baseline), key=lambda o: o.objective)
    assert outcomes[1].candidate.flags == best_src.candidate.flags
    assert enqueue_warm_start(dst.study, src.study, dst.space.knobs) == []  # once per study
