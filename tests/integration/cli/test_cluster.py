"""`kvtune export-workers` as the user runs it: the files read the study back from storage (its
GPUs per trial, the threads its space tries), and the storage URL goes into an env file only its
owner can read (Slurm) or stays in the Secret (Kubernetes), never into the job file. Bad input:
tests/integration/cli/test_bad_input_cluster.py."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import yaml

import kvtune
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import prepare
from kvtune.tuner.fleet.setup import set_up_study
from kvtune.tuner.store.storage import sqlite_url
from tests.conftest import TINY

SRC = str(Path(kvtune.__file__).parents[1])  # the child runs this checkout's kvtune


def kvtune_cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "COLUMNS": "400",
            "KVTUNE_CACHE": str(cwd / "cache"),
            "PYTHONPATH": SRC,
            **env,
        },
    )


def set_up(tmp_path: Path, gpus: int, threads: int | None = None) -> str:
    """A set-up study on the fake launcher; `threads`: its space has a threads knob up to that."""
    url = sqlite_url(tmp_path)
    spec = StudySpec(study="fleet", trials=5, workload=TINY).validate()  # no model named: resolved below
    launcher = FakeLauncher(model_path="/models/m/model.gguf")
    if threads is not None:
        launcher.knobs = (*launcher.knobs, Knob("threads", KnobKind.INT, low=1, high=threads))
    # each trial gets as many CPUs as the space's threads (--cpus-per-trial at set-up), else 1: never this host's count
    prepared = prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"), cpus_per_trial=threads or 1)
    set_up_study(prepared, url, gpus_per_trial=gpus)
    return url


def directives(script: str) -> dict[str, str]:
    pairs = [x.removeprefix("#SBATCH --").split("=", 1) for x in script.splitlines() if x.startswith("#SBATCH")]
    return {p[0]: p[-1] for p in pairs}


def test_the_sbatch_script_asks_for_the_gpus_and_cpus_the_study_needs(tmp_path):
    url = set_up(tmp_path, gpus=2, threads=6)
    out = tmp_path / "jobs" / "workers.sbatch"
    out.parent.mkdir()
    args = ["--storage", url, "--study", "fleet", "--workers", "3", "--mem", "24G", "-o", str(out)]
    done = kvtune_cli("export-workers", "-f", "slurm", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = out.read_text()
    d = directives(script)
    assert (d["gres"], d["array"], d["cpus-per-task"], d["mem"]) == (
        "gpu:2",
        "0-2",
        "6",
        "24G",
    )  # 6: the space's threads
    (line,) = [x for x in script.splitlines() if x.endswith(" &")]
    assert line.split()[0] == str(Path(sys.executable).parent / "kvtune")  # this venv's kvtune
    assert url not in script and "--storage" not in script
    env_file = out.with_name("workers.sbatch.env")
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert env_file.read_text().splitlines()[-1] == f"KVTUNE_STORAGE={url}"
    assert f"env_file={env_file}" in script
    assert "submit with `sbatch" in done.stderr and str(env_file) in done.stderr


def test_cpus_per_worker_overrides_and_the_url_may_come_from_the_environment(tmp_path):
    url = set_up(tmp_path, gpus=0)
    done = kvtune_cli(
        "export-workers", "-f", "slurm", "--study", "fleet", "--workers", "1", "--cpus-per-worker", "3",
        "--mem", "512M", cwd=tmp_path, KVTUNE_STORAGE=url,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    d = directives(done.stdout)
    assert (d["cpus-per-task"], d["mem"]) == ("3", "512M") and "gres" not in d
    printed_env = tmp_path / "kvtune-fleet.env"  # the script printed: its env file in the current folder
    assert stat.S_IMODE(printed_env.stat().st_mode) == 0o600 and url in printed_env.read_text()
    assert url not in done.stdout


def test_the_indexed_job_mounts_the_claim_and_names_the_secrets_namespace(tmp_path):
    url = set_up(tmp_path, gpus=1, threads=4)
    out = tmp_path / "workers.yaml"
    args = ["--storage", url, "--study", "fleet", "--workers", "2", "--image", "kvtune:test", "--model-pvc", "models"]
    done = kvtune_cli(
        "export-workers", "-f", "k8s-job", *args, "--mem", "8G", "--namespace", "tuning", "-o", str(out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "kubectl create secret generic kvtune-storage -n tuning --from-literal=url=URL" in done.stderr
    assert "kubectl apply -f" in done.stderr
    m = yaml.safe_load(out.read_text())
    (container,) = m["spec"]["template"]["spec"]["containers"]
    assert m["metadata"]["namespace"] == "tuning"
    assert {v["mountPath"]: v["name"] for v in container["volumeMounts"]}["/models/m"] == "model"
    assert container["resources"]["limits"] == {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 1}
    assert url not in out.read_text() and not list(tmp_path.glob("*.env"))  # no env file for Kubernetes
