"""`kvtune export-workers` and `kvtune run --setup-only` as the user runs them: the files read
the study back from storage, and bad input is one line with exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

import kvtune
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.build import prepare
from kvtune.tuner.fleet.setup import set_up_study
from kvtune.tuner.fleet.storage import sqlite_url
from tests.conftest import TINY

SRC = str(Path(kvtune.__file__).parents[1])  # the child runs this checkout's kvtune


def kvtune_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "KVTUNE_CACHE": str(cwd / "cache"), "PYTHONPATH": SRC},
    )


def set_up(tmp_path: Path, gpus: int) -> str:
    url = sqlite_url(tmp_path)
    spec = StudySpec(study="fleet", trials=5, workload=TINY).validate()  # no model named: resolved below
    launcher = FakeLauncher(model_path="/models/m/model.gguf")
    set_up_study(prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs")), url, gpus_per_trial=gpus)
    return url


def test_the_sbatch_script_asks_for_the_gpus_the_study_stored(tmp_path):
    url = set_up(tmp_path, gpus=2)
    done = kvtune_cli(
        "export-workers", "-f", "slurm", "--storage", url, "--study", "fleet", "--workers", "3", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "#SBATCH --gres=gpu:2" in done.stdout and "#SBATCH --array=0-2" in done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("exec ")]
    assert line.split()[1] == str(Path(sys.executable).parent / "kvtune")  # this venv's kvtune


def test_the_indexed_job_mounts_the_claim_at_the_models_directory(tmp_path):
    url = set_up(tmp_path, gpus=1)
    out = tmp_path / "workers.yaml"
    args = ["--storage", url, "--study", "fleet", "--workers", "2", "--image", "kvtune:test", "--model-pvc", "models"]
    done = kvtune_cli("export-workers", "-f", "k8s-job", *args, "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kubectl apply -f" in done.stderr
    (container,) = yaml.safe_load(out.read_text())["spec"]["template"]["spec"]["containers"]
    assert container["volumeMounts"][0]["mountPath"] == "/models/m"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    url = set_up(tmp_path, gpus=0)
    cases = [
        (("export-workers", "-f", "pbs", "--storage", url, "--study", "fleet", "--workers", "2"), "unknown --format"),
        (("export-workers", "-f", "slurm", "--storage", url, "--study", "nope", "--workers", "2"), "no study 'nope'"),
        (("export-workers", "-f", "k8s-job", "--storage", url, "--study", "fleet", "--workers", "2"), "needs --image"),
        (("run", "--setup-only", "--study", "s"), "--setup-only needs --storage"),
    ]
    for argv, message in cases:
        done = kvtune_cli(*argv, cwd=tmp_path)
        assert done.returncode == 2, (argv, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
