"""The sbatch script: its directives and its worker command line, read back as Slurm and bash
would, and the env file that carries the storage URL instead."""

import shlex

import pytest

from kvtune.artifacts.cluster.job import WorkerJob
from kvtune.artifacts.cluster.slurm import render_env_file, render_slurm, time_limit_s
from kvtune.errors import SpecError

URL = "postgresql://tuner:p%40ss-9x@db.internal/kvtune"
ENV_FILE = "/shared/jobs/workers.sbatch.env"


def job(**kw) -> WorkerJob:
    base = dict(study="s", workers=2, cpus=4, memory_mib=8192, env_file=ENV_FILE)
    return WorkerJob(**{**base, **kw})


def directives(script: str) -> dict[str, str]:
    pairs = [
        line.removeprefix("#SBATCH --").split("=", 1) for line in script.splitlines() if line.startswith("#SBATCH")
    ]
    return {p[0]: p[1] if len(p) == 2 else "" for p in pairs}


def worker_line(script: str) -> str:
    (line,) = [line for line in script.splitlines() if line.endswith(" &")]
    return line.removesuffix(" &")


def worker_argv(script: str) -> list[str]:
    """The worker's argv as bash splits it (the task's runs folder left as its variable)."""
    return shlex.split(worker_line(script).replace('"$runs_dir"', "RUNS"))


def test_a_gpu_study_is_an_array_of_workers_with_their_cpus_memory_and_gpus():
    script = render_slurm(
        job(
            study="Qwen 7B/h100",
            workers=8,
            gpus_per_trial=2,
            cpus=16,
            memory_mib=64 * 1024,
            command=("/opt/venv/bin/kvtune", "worker"),
            partition="gpu",
            time_limit="4:00:00",
        )
    )
    assert script.startswith("#!/bin/bash\n")
    d = directives(script)
    assert d["array"] == "0-7" and d["ntasks"] == "1"
    assert (d["cpus-per-task"], d["mem"], d["gres"]) == ("16", "64G", "gpu:2")
    assert (d["partition"], d["time"]) == ("gpu", "4:00:00")
    assert d["job-name"] == "kvtune-qwen-7b-h100"
    assert d["output"] == "kvtune-qwen-7b-h100-%A_%a.log" and d["open-mode"] == "append"  # a requeue appends
    assert d["signal"] == "B:USR1@120"  # the batch shell alone hears the time limit coming
    assert "requeue" in d
    assert worker_argv(script) == [
        "/opt/venv/bin/kvtune",
        "worker",
        "--study",
        "Qwen 7B/h100",  # the study's own name, quoted for bash
        "--gpus-per-trial",
        "2",
        "--runs-dir",
        "RUNS",
    ]
    assert "--slot" not in script  # the array index names the worker; Slurm picks its GPUs


def test_the_storage_url_is_in_the_env_file_never_in_the_script():
    script = render_slurm(job(command=("/opt/venv/bin/kvtune", "worker")))
    assert URL not in script and "p%40ss" not in script and "--storage" not in script
    assert 'set -a; . "$env_file"; set +a' in script
    assert f"env_file={ENV_FILE}" in script
    env = render_env_file(URL)
    (assignment,) = [line for line in env.splitlines() if not line.startswith("#")]
    name, value = assignment.split("=", 1)
    assert name == "KVTUNE_STORAGE" and shlex.split(value) == [URL]


def test_each_task_has_its_own_runs_folder():
    script = render_slurm(job(runs_dir="/scratch/kv runs"))
    (line,) = [line for line in script.splitlines() if line.startswith("runs_dir=")]
    assert (
        line
        == "runs_dir='/scratch/kv runs'/task-\"${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-0}}_${SLURM_ARRAY_TASK_ID:-0}\""
    )
    assert ' --runs-dir "$runs_dir"' in worker_line(script)


def test_exit_75_requeues_the_task_and_nothing_else_does():
    script = render_slurm(job())
    lines = script.splitlines()
    start = lines.index('if [ "$status" -eq 75 ]; then')
    assert any('scontrol requeue "${SLURM_JOB_ID:-}"' in line for line in lines[start:])
    assert sum("scontrol requeue" in line for line in lines) == 1  # only on 75
    assert lines[-1] == 'exit "$status"'  # the worker's own status otherwise (2 stays 2)
    assert "trap : TERM" in lines  # the shell outlives scancel's SIGTERM to read the status


def test_a_cpu_study_asks_for_no_gpus():
    d = directives(render_slurm(job(workers=1)))
    assert "gres" not in d and d["array"] == "0-0" and d["cpus-per-task"] == "4" and d["mem"] == "8G"
    assert "partition" not in d and "time" not in d


def test_memory_not_in_whole_gibibytes_is_given_in_mebibytes():
    assert directives(render_slurm(job(memory_mib=1536)))["mem"] == "1536M"


def test_worker_command_and_args_replace_the_kvtune_path_not_the_text():
    script = render_slurm(
        job(
            command=("python3", "-m", "kvtune.testing.driver", "--join"),
            worker_args=("--llama-server", "/opt/llama dir/llama-server"),
        )
    )
    argv = worker_argv(script)
    assert argv[:4] == ["python3", "-m", "kvtune.testing.driver", "--join"]
    assert argv[-2:] == ["--llama-server", "/opt/llama dir/llama-server"]
    assert argv[argv.index("--runs-dir") + 1] == "RUNS"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("240", 240 * 60),
        ("30:15", 30 * 60 + 15),
        ("4:00:00", 4 * 3600),
        ("48:00:00", 48 * 3600),
        ("1-12", 36 * 3600),
        ("2-03:04", (51 * 60 + 4) * 60),
        ("1-00:00:30", 86400 + 30),
        ("UNLIMITED", 0),
        ("0", 0),
    ],
)
def test_time_limits_in_every_form_slurm_reads(text, seconds):
    assert time_limit_s(text) == seconds


@pytest.mark.parametrize("text", ["banana", "4h", "1:2:3:4", "-5", "1-25", "10:60", "1:00:75", "2-", ""])
def test_other_time_limits_are_refused_naming_the_forms(text):
    with pytest.raises(SpecError, match=r"--time must be a Slurm time limit: MINUTES, MINUTES:SECONDS, .*DAYS-HOURS"):
        time_limit_s(text)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"workers": 0}, "--workers must be at least 1"),
        ({"gpus_per_trial": -1}, "--gpus-per-trial must be 0 or more"),
        ({"cpus": 0}, "--cpus-per-worker must be at least 1"),
        ({"cpus": None}, "--cpus-per-worker is needed"),
        ({"memory_mib": None}, "--mem is needed"),
        ({"time_limit": "2"}, "--time 2 is too short"),
        ({"time_limit": "banana"}, "--time must be a Slurm time limit"),
        ({"partition": "gpu\nrm -rf ~"}, "--partition must be one word"),
        ({"worker_args": ("--storage=sqlite:///x.db",)}, "export-workers sets --storage itself"),
        ({"worker_args": ("--runs-dir", "/x")}, "export-workers sets --runs-dir itself"),
        ({"study": "a\nb"}, "--study must be a study name on one line"),
        ({"env_file": None}, "needs the path of its storage env file"),
    ],
)
def test_bad_options_are_one_line_errors(kw, message):
    with pytest.raises(SpecError, match=message):
        render_slurm(job(**kw))
