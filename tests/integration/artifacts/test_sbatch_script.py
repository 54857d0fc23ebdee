"""The sbatch script as the batch shell runs it, without a Slurm: bash runs the rendered script
with the environment Slurm gives an array task, a fake worker that records what it got and
exits as told, and a fake `scontrol` on PATH that records its calls. What the e2e Slurm test
cannot make happen on purpose is checked here: exit 75 requeues (and only 75), the URL reaches
the worker only through its environment, the warning signal reaches the worker exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvtune.artifacts.cluster.job import WorkerJob
from kvtune.artifacts.cluster.slurm import MAX_REQUEUES, render_env_file, render_slurm

URL = "postgresql://tuner:s3cret-pw@db.internal:5432/kvtune"

FAKE_WORKER = """
import json, os, signal, sys, time
out = os.environ["FAKE_OUT"]
terms = []
def on_term(signum, frame):
    terms.append(time.monotonic())
signal.signal(signal.SIGTERM, on_term)
with open(os.path.join(out, "worker.json"), "w") as f:
    json.dump({"argv": sys.argv[1:], "storage": os.environ.get("KVTUNE_STORAGE"), "pid": os.getpid()}, f)
open(os.path.join(out, "ready"), "w").close()
if os.environ.get("FAKE_WAIT_FOR_TERM"):
    deadline = time.monotonic() + 20
    while not terms and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # a second SIGTERM, had the shell passed one on, would arrive meanwhile
with open(os.path.join(out, "terms"), "w") as f:
    f.write(str(len(terms)))
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


@pytest.fixture
def task(tmp_path: Path) -> dict:
    """The script, its env file, a fake worker and scontrol, and the array task's environment."""
    (tmp_path / "worker.py").write_text(FAKE_WORKER)
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.parent.mkdir()
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/scontrol.log\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    env_file = tmp_path / "workers.sbatch.env"
    env_file.write_text(render_env_file(URL))
    env_file.chmod(0o600)
    job = WorkerJob(
        study="share",
        workers=3,
        cpus=2,
        memory_mib=512,
        command=(sys.executable, str(tmp_path / "worker.py")),
        runs_dir=str(tmp_path / "runs"),
        env_file=str(env_file),
    )
    script = tmp_path / "workers.sbatch"
    script.write_text(render_slurm(job))
    env = {
        "PATH": f"{scontrol.parent}:/usr/bin:/bin",
        "FAKE_OUT": str(tmp_path),
        "SLURM_JOB_ID": "1007",
        "SLURM_ARRAY_JOB_ID": "1005",
        "SLURM_ARRAY_TASK_ID": "2",
    }
    return {"dir": tmp_path, "script": script, "env": env, "env_file": env_file}


def run(task: dict, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(task["script"])],
        env={**task["env"], **env},
        cwd=task["dir"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def requeues(task: dict) -> list[str]:
    log = task["dir"] / "scontrol.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_worker_gets_the_url_from_its_environment_and_a_folder_of_its_own(task):
    done = run(task)
    assert done.returncode == 0, done.stderr
    seen = json.loads((task["dir"] / "worker.json").read_text())
    assert seen["storage"] == URL  # sourced from the env file
    assert URL not in " ".join(seen["argv"]) and "--storage" not in seen["argv"]
    runs = seen["argv"][seen["argv"].index("--runs-dir") + 1]
    assert runs == f"{task['dir']}/runs/task-1005_2"  # array job and task: never shared
    assert seen["argv"][:2] == ["--study", "share"]
    assert requeues(task) == []


def test_exit_75_requeues_the_task_and_the_status_stays_75(task):
    done = run(task, FAKE_EXIT="75")
    assert done.returncode == 75
    assert requeues(task) == ["requeue 1007"]  # the task's own job id
    assert "requeueing task 1007 (requeue 1 of" in done.stderr


def test_exit_75_after_the_last_requeue_gives_up(task):
    done = run(task, FAKE_EXIT="75", SLURM_RESTART_COUNT=str(MAX_REQUEUES))
    assert done.returncode == 75 and requeues(task) == []
    assert "gives up" in done.stderr


@pytest.mark.parametrize("status", [2, 1, 130])
def test_other_exit_statuses_end_the_task_as_they_are(task, status):
    done = run(task, FAKE_EXIT=str(status))
    assert done.returncode == status and requeues(task) == []


def test_a_missing_env_file_is_bad_input_and_starts_no_worker(task):
    task["env_file"].unlink()
    done = run(task)
    assert done.returncode == 2
    assert "cannot read" in done.stderr and "the nodes must see it at this path" in done.stderr
    assert not (task["dir"] / "worker.json").exists()


def _started(task: dict, **env: str) -> subprocess.Popen:
    shell = subprocess.Popen(
        ["bash", str(task["script"])],
        env={**task["env"], "FAKE_WAIT_FOR_TERM": "1", "FAKE_EXIT": "130", **env},
        cwd=task["dir"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (task["dir"] / "ready").exists():
        assert shell.poll() is None and time.monotonic() < deadline, "the worker never started"
        time.sleep(0.05)
    return shell


def test_the_time_limit_warning_reaches_the_worker_once_as_sigterm(task):
    shell = _started(task)
    try:
        shell.send_signal(signal.SIGUSR1)  # what --signal=B:USR1@120 sends to the batch shell
        assert shell.wait(timeout=30) == 130  # the worker's status, read after it left
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
    assert (task["dir"] / "terms").read_text() == "1"


def test_a_sigterm_to_every_process_reaches_the_worker_once(task):
    """scancel: Slurm signals the batch shell and the worker alike. The shell passes nothing on
    (a second SIGTERM would cut the worker's clean-up short) and stays for its status."""
    shell = _started(task)
    worker = json.loads((task["dir"] / "worker.json").read_text())["pid"]
    try:
        shell.send_signal(signal.SIGTERM)
        os.kill(worker, signal.SIGTERM)
        assert shell.wait(timeout=30) == 130
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
    assert (task["dir"] / "terms").read_text() == "1"
    assert requeues(task) == []
