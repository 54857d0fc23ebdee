"""The sbatch script: its directives and its one command line, read back as Slurm and bash would."""

import shlex

import pytest

from kvtune.artifacts.cluster.job import WorkerJob
from kvtune.artifacts.cluster.slurm import render_slurm
from kvtune.errors import SpecError

URL = "postgresql://tuner:p%40ss@db.internal/kvtune"


def directives(script: str) -> dict[str, str]:
    pairs = [
        line.removeprefix("#SBATCH --").split("=", 1) for line in script.splitlines() if line.startswith("#SBATCH")
    ]
    return {k: v for k, v in pairs}


def exec_argv(script: str) -> list[str]:
    (line,) = [line for line in script.splitlines() if line.startswith("exec ")]
    return shlex.split(line.removeprefix("exec "))


def test_a_gpu_study_is_an_array_of_workers_with_their_gpus():
    job = WorkerJob(
        study="Qwen 7B/h100",
        storage_url=URL,
        workers=8,
        gpus_per_trial=2,
        command=("/opt/venv/bin/kvtune", "worker"),
        partition="gpu",
        time_limit="4:00:00",
        cpus_per_task=16,
    )
    script = render_slurm(job)
    assert script.startswith("#!/bin/bash\n")
    d = directives(script)
    assert d["array"] == "0-7" and d["gres"] == "gpu:2" and d["ntasks"] == "1"
    assert (d["partition"], d["time"], d["cpus-per-task"]) == ("gpu", "4:00:00", "16")
    assert d["job-name"] == "kvtune-qwen-7b-h100"
    assert d["signal"] == "B:TERM@120"  # the batch shell (the exec'd worker) hears the time limit coming
    assert d["output"] == "kvtune-qwen-7b-h100-%A_%a.log"
    assert exec_argv(script) == [
        "/opt/venv/bin/kvtune",
        "worker",
        "--storage",
        URL,
        "--study",
        "Qwen 7B/h100",  # the study's own name, quoted for bash
        "--gpus-per-trial",
        "2",
    ]
    assert "--slot" not in script  # the array index names the worker; Slurm picks its GPUs


def test_a_cpu_study_asks_for_no_gpus():
    script = render_slurm(WorkerJob(study="cpu", storage_url=URL, workers=1, runs_dir="/scratch/runs"))
    d = directives(script)
    assert "gres" not in d and d["array"] == "0-0"
    assert "partition" not in d and "time" not in d
    argv = exec_argv(script)
    assert argv[argv.index("--runs-dir") + 1] == "/scratch/runs" and "--gpus-per-trial" not in argv


def test_worker_command_and_args_replace_the_kvtune_path_not_the_text():
    job = WorkerJob(
        study="s",
        storage_url=URL,
        workers=3,
        command=("python3", "-m", "kvtune.testing.driver", "--join"),
        worker_args=("--llama-server", "/opt/llama dir/llama-server"),
    )
    argv = exec_argv(render_slurm(job))
    assert argv[:4] == ["python3", "-m", "kvtune.testing.driver", "--join"]
    assert argv[-2:] == ["--llama-server", "/opt/llama dir/llama-server"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("workers", 0, "--workers must be at least 1"), ("gpus_per_trial", -1, "--gpus-per-trial must be 0 or more")],
)
def test_bad_counts_are_one_line_errors(field, value, message):
    job = WorkerJob(study="s", storage_url=URL, **{"workers": 2, field: value})
    with pytest.raises(SpecError, match=message):
        render_slurm(job)
