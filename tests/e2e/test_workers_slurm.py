"""Workers placed by a real Slurm: the exported sbatch script is submitted to a single-node cluster
(tests/e2e/slurm_cluster.py), its 3 array tasks share a study in a real PostgreSQL, the first
task seen measuring a trial is `scancel`ed mid-trial, and the study still measures every config
exactly once, loses no trial and leaves no process behind. --cpus-per-task is honoured where it
counts: Slurm binds each task to the CPU it granted (task/affinity), and every trial records
that its worker ran on exactly that many CPUs (not the machine's count).

The workers run the fake launcher (kvtune.testing.driver --join, given to the export as
--worker-command): the script is otherwise exactly what `kvtune export-workers` writes, with
--cpus-per-task and --mem that Slurm grants each task, and the storage URL only in the 0600 env
file the script sources (the fake worker reads KVTUNE_STORAGE, as `kvtune worker` does)."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest

from tests.e2e.slurm_cluster import SlurmCluster, missing_programs, start_cluster
from tests.e2e.test_workers_postgres import TRIALS, check_exactly_once

pytestmark = pytest.mark.e2e
STUDY = "slurm-share"
WORKERS = 3
CPUS_PER_WORKER = 1  # the study's trials get 1 CPU; on 2 cores two tasks run side by side, the third after
# Quick recovery should a worker die without its SIGTERM handler (the test expects the handler).
FAST_RECOVERY = {"KVTUNE_HEARTBEAT_S": "1", "KVTUNE_GRACE_S": "4"}


@pytest.fixture(scope="session")
def slurm():
    """munged + slurmctld + slurmd for the session, ended by PID afterwards (Debian packages
    slurm-wlm and munge; `make test` installs them when run as root)."""
    missing = missing_programs()
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing: Debian packages slurm-wlm and munge)")
    cluster = start_cluster()
    yield cluster
    cluster.stop()
    shutil.rmtree(cluster.base, ignore_errors=True)


def _kvtune(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


def _set_up(tmp_path: Path, url: str) -> None:
    """The study in PostgreSQL, no trial run: what `kvtune run --setup-only` does, on the fake launcher."""
    argv = [sys.executable, "-m", "kvtune.testing.driver", "--setup-only", "--runs-dir", str(tmp_path / "setup")]
    argv += ["--storage", url, "--study", STUDY, "--trials", str(TRIALS), "--requests", "24"]
    argv += ["--cpus-per-trial", str(CPUS_PER_WORKER)]  # the driver's flag; the workers' share, not this host's count
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _export(tmp_path: Path, url: str, mark: str) -> Path:
    fake_worker = shlex.join(
        [sys.executable, "-m", "kvtune.testing.driver", "--join", "--base-ttft-ms", "500", "--mark", mark]
    )
    script = tmp_path / "workers.sbatch"
    _kvtune(
        "export-workers",
        "--format",
        "slurm",
        "--storage",
        url,
        "--study",
        STUDY,
        "--workers",
        str(WORKERS),
        "--cpus-per-worker",
        str(CPUS_PER_WORKER),
        "--mem",
        "256M",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--worker-command",
        fake_worker,
        "-o",
        str(script),
        cwd=tmp_path,
    )
    text = script.read_text()
    assert f"#SBATCH --array=0-{WORKERS - 1}" in text and f"#SBATCH --cpus-per-task={CPUS_PER_WORKER}" in text
    assert url not in text  # the URL is in the env file beside the script, readable by its owner alone
    env_file = script.with_name(script.name + ".env")
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600 and url in env_file.read_text()
    return script


def _granted(cluster: SlurmCluster, job: str) -> list[str]:
    """Each array task's CPUs and memory as Slurm recorded them (`scontrol show job`, one line
    per task; finished tasks stay listed for MinJobAge)."""
    lines = cluster.command("scontrol", "show", "job", "-o", job, check=False).splitlines()
    fields = [dict(w.split("=", 1) for w in line.split() if "=" in w) for line in lines if line.strip()]
    return [f"{f.get('NumCPUs')} cpus, {f.get('MinMemoryNode')}" for f in fields]


def _running(url: str) -> dict[int, optuna.trial.FrozenTrial]:
    """The trials being run now, by the array task running each (a rejected flag ends at once: skipped)."""
    s = optuna.load_study(study_name=STUDY, storage=url)
    found = {}
    for t in s.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        task = (t.user_attrs.get("worker") or {}).get("slot")
        if task is not None and t.params.get("bogus") is False:
            found[task] = t
    return found


def _measuring(url: str) -> tuple[int, optuna.trial.FrozenTrial] | None:
    """An array task and the trial it is still running a second after it was asked: being
    measured, not one it asked and stepped back from at once (another worker measures those
    parameters). Any task will do: which one the scheduler starts first, and so which one
    gets a config to measure (the fake space has three), is Slurm's choice."""
    seen = _running(url)
    if not seen:
        return None
    time.sleep(1.0)
    still = _running(url)
    for task, trial in sorted(seen.items()):
        if task in still and still[task].number == trial.number:
            return task, trial
    return None


def _wait_for(what: str, check, timeout_s: float, cluster: SlurmCluster, logs: Path, job: str | None = None):
    """`check()`'s first truthy answer within `timeout_s`; with `job`, fail as soon as the job
    has left the queue (its tasks all ended: nothing more can happen)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if job is not None and not cluster.command("squeue", "-h", "-j", job, check=False).strip():
            pytest.fail(f"{what}: job {job} ended{_tails(logs)}")
        time.sleep(0.3)
    pytest.fail(f"{what} after {timeout_s:.0f} s; squeue: {cluster.command('squeue', check=False)}{_tails(logs)}")


def _tails(folder: Path) -> str:
    """The last lines of each array task's log: what a failure message shows."""
    parts = []
    for log in sorted(folder.glob("kvtune-*.log")):
        parts.append(f"\n--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    return "".join(parts)


def _processes_with(mark: str) -> list[int]:
    """PIDs whose command line or environment carries the test's mark (workers, fake servers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            seen = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if mark.encode() in seen:
            found.append(int(entry.name))
    return found


def test_slurm_array_workers_survive_a_scancel(tmp_path, postgres_url, slurm):
    mark = f"kvtune-slurm-{uuid.uuid4().hex[:8]}"
    _set_up(tmp_path, postgres_url)
    script = _export(tmp_path, postgres_url, mark)
    env = {**slurm.env, **FAST_RECOVERY}
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    measuring = lambda: _measuring(postgres_url)  # noqa: E731
    task, victim = _wait_for("no array task measured a trial", measuring, 120, slurm, tmp_path, job)
    assert set(_granted(slurm, job)) == {f"{CPUS_PER_WORKER} cpus, 256M"}  # --cpus-per-task and --mem honoured
    slurm.command("scancel", f"{job}_{task}")
    finished = lambda: not slurm.command("squeue", "-h", "-j", job).strip()  # noqa: E731
    _wait_for("the job array did not finish", finished, 240, slurm, tmp_path)

    s = optuna.load_study(study_name=STUDY, storage=postgres_url)
    complete = [t for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE]
    check_exactly_once(s, complete)
    assert {t.user_attrs["worker"]["slot"] for t in complete} - {task}  # the other tasks measured too
    stopped = s.trials[victim.number]
    assert stopped.state == optuna.trial.TrialState.FAIL and stopped.user_attrs.get("interrupted")  # by SIGTERM
    retried = [t for t in complete if t.user_attrs.get("retry_of") == victim.number]
    assert retried and retried[0].params == victim.params  # re-run by another worker: not lost
    left = [t.number for t in s.trials if t.state in (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)]
    assert left == []
    # Slurm bound each task to its granted CPU, and kvtune saw exactly that: the process's own
    # CPUs (host_cpus: its affinity) and the set its servers were pinned to
    for t in complete:
        assert t.user_attrs["hardware"]["host_cpus"] == CPUS_PER_WORKER, t.user_attrs["hardware"]
        assert len(t.user_attrs["worker"]["cpus"]) == CPUS_PER_WORKER, t.user_attrs["worker"]
    log = (tmp_path / f"kvtune-{STUDY}-{job}_{task}.log").read_text()
    assert '"interrupted": true' in log
    assert _processes_with(mark) == []  # no worker, no fake server left
    runs = {p.name for p in (tmp_path / "runs").iterdir()}
    assert f"task-{job}_{task}" in runs and runs <= {f"task-{job}_{i}" for i in range(WORKERS)}  # one per task
