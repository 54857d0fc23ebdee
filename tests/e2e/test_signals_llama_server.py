"""Nothing lost, nothing left behind: SIGKILL and Ctrl-C of a running `kvtune run` on the real
llama-server. The server dies with kvtune, the study survives and resumes, re-running the
interrupted trial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from kvtune.errors import KvtuneError
from kvtune.launchers.llama_server import find_llama_server

pytestmark = pytest.mark.e2e
ARGS = [
    "--concurrency",
    "2",
    "--prompt-tokens",
    "32",
    "--output-tokens",
    "8",
    "--set",
    "workload.num_requests=16",
    "--set",
    "workload.warmup_requests=1",
    "--target",
    "ttft<60s",
    "--set",
    "confirm_top=0",
]  # signals are the point here, not the confirmation phase


@pytest.fixture(scope="module", autouse=True)
def llama_server() -> str:
    try:
        return find_llama_server()
    except KvtuneError as e:
        pytest.skip(str(e))


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default, so a suite started with SIGINT
    ignored (a background job of a non-interactive shell) does not pass SIG_IGN on to kvtune."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(runs: Path, study: str, trials: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            "run",
            "--runs-dir",
            str(runs),
            "--study",
            study,
            "--trials",
            str(trials),
            *ARGS,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )


def wait_for_server(run_dir: Path, timeout: float = 120) -> int:
    """PID of the server a running kvtune started (from its record), once one is up."""
    pid_file = run_dir / "server.pid.0.json"  # worker slot 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid_file.exists():
            try:
                return json.loads(pid_file.read_text())["pid"]
            except (ValueError, KeyError):
                pass
        time.sleep(0.1)
    raise AssertionError("no server was started")


def gone(pid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            # a zombie is dead but not yet reaped; its parent was kvtune, now gone
            if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.2)
    return False


def our_servers(run_dir: Path) -> list[str]:
    """llama-server processes whose command line names this run's model and port range: read
    from ps, to prove none is left (we only look, never signal by name)."""
    out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if "llama-server" in ln and " Z" not in ln and str(run_dir) in ln]


def finished_numbers(run_dir: Path, study: str) -> list[int]:
    s = optuna.load_study(study_name=study, storage=f"sqlite:///{run_dir / 'study.db'}")
    return [t.number for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE]


def test_sigkill_of_kvtune_takes_the_server_with_it_and_the_study_resumes(tmp_path):
    run_dir = tmp_path / "k"
    proc = start_run(tmp_path, "k", trials=2)
    server_pid = wait_for_server(run_dir)
    os.kill(proc.pid, signal.SIGKILL)  # kvtune alone, not its group
    proc.wait(timeout=10)
    assert gone(server_pid), "llama-server outlived kvtune"
    assert not our_servers(run_dir)

    resumed = start_run(tmp_path, "k", trials=2)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out + err
    assert len(finished_numbers(run_dir, "k")) == 2
    results = json.loads((run_dir / "results.json").read_text())
    assert sum(t["baseline"] for t in results["trials"]) == 1  # re-run, once


def test_ctrl_c_records_the_trial_as_interrupted_and_stops_the_server(tmp_path):
    run_dir = tmp_path / "c"
    proc = start_run(tmp_path, "c", trials=2)
    server_pid = wait_for_server(run_dir)
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "interrupted" in err and "Run the same command to resume" in err
    assert "Traceback" not in err
    assert gone(server_pid)
    assert not list(run_dir.glob("server.pid*.json"))
    s = optuna.load_study(study_name="c", storage=f"sqlite:///{run_dir / 'study.db'}")
    W = optuna.trial.TrialState.WAITING
    # the interrupted baseline, the informed start still queued, the baseline queued again
    assert [t.state for t in s.trials] == [optuna.trial.TrialState.FAIL, W, W]
    assert s.trials[0].user_attrs.get("interrupted")
    assert s.trials[2].user_attrs.get("baseline") and s.trials[2].user_attrs.get("retry_of") == 0

    resumed = start_run(tmp_path, "c", trials=2)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out + err
    assert len(finished_numbers(run_dir, "c")) == 2


def test_ctrl_c_during_a_traces_speed_probe_stops_its_server_and_exits_130(tmp_path):
    """Ctrl-C while `kvtune run --workload trace:...` probes the server's defaults (before any
    study exists, tuner/host_speed.py): exit 130 with one line, no traceback, the probe's server
    gone and its record removed."""
    run_dir = tmp_path / "p"
    argv = [sys.executable, "-m", "kvtune.cli", "run", "--runs-dir", str(tmp_path), "--study", "p"]
    argv += ["--workload", "trace:mooncake-conv", "--trials", "2"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )
    pid_file = run_dir / "host-speed" / "server.pid"
    deadline = time.monotonic() + 120
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), "the probe started no server"
    server_pid = json.loads(pid_file.read_text())["pid"]
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "interrupted before the first trial" in err and "Traceback" not in err
    assert gone(server_pid)
    assert not pid_file.exists() and not (run_dir / "study.db").exists()
