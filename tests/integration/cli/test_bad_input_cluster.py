"""Bad input to `kvtune export-workers` (issues 29 and 31): what an operator would mistype, as a
table. Each row: the argv after `kvtune export-workers`, and a phrase the one-line error must
contain. Every row must exit 2 with exactly one line on stderr and write nothing: no job file,
no env file holding the storage URL, nothing in the current folder.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import prepare
from kvtune.tuner.fleet.setup import PLACEMENT_ATTR, set_up_study
from tests.conftest import TINY

SLURM = ["-f", "slurm", "--study", "fleet", "--workers", "2", "--mem", "4G", "-o", "{o}/workers.sbatch"]
K8S = ["-f", "k8s-job", "--study", "fleet", "--workers", "2", "--mem", "4G", "--image", "kvtune:1", "-o", "{o}/w.yaml"]

ROWS: list[tuple[str, list[str], str]] = [
    # what the operator gave                       argv after `kvtune export-workers`        phrase
    ("a time limit that is no time", [*SLURM, "--time", "banana"], "--time must be a Slurm time limit: MINUTES"),
    ("hours as letters", [*SLURM, "--time", "4h"], "DAYS-HOURS:MINUTES:SECONDS"),
    ("seconds past 59", [*SLURM, "--time", "10:75"], "--time must be a Slurm time limit"),
    ("a time limit shorter than the stop warning", [*SLURM, "--time", "2"], "--time 2 is too short"),
    ("no workers", [*SLURM, "--workers", "0"], "--workers must be at least 1"),
    ("negative workers", [*K8S, "--workers", "-3"], "--workers must be at least 1"),
    ("no CPUs", [*SLURM, "--cpus-per-worker", "0"], "--cpus-per-worker must be at least 1"),
    ("fewer CPUs than the space's threads", [*SLURM, "--cpus-per-task", "2"], "fewer than the 6 threads"),
    ("memory without a unit", [*SLURM, "--mem", "64"], "--mem must be a whole number of M, G or T"),
    ("memory as a fraction", [*K8S, "--mem", "1.5G"], "--mem must be a whole number of M, G or T"),
    ("negative GPUs", [*SLURM, "--gpus-per-trial", "-1"], "--gpus-per-trial must be 0 or more"),
    (
        "workers past any scheduler",
        [*SLURM, "--workers", "1" + "0" * 30],
        "--workers must be at most 100000, got 1e+30",
    ),
    ("GPUs past any node", [*K8S, "--gpus-per-trial", str(2**63)], "--gpus-per-trial must be at most 1024"),
    ("CPUs past any node", [*SLURM, "--cpus-per-worker", "1" + "0" * 30], "--cpus-per-worker must be at most 100000"),
    ("memory past any node", [*SLURM, "--mem", "9999999T"], "--mem must be at most 1024T"),
    ("a time limit in Arabic-Indic digits", [*SLURM, "--time", "١٢٠"], "--time must be a Slurm time limit"),
    (
        "a worker command on two lines",
        [*SLURM, "--worker-command", "kvtune\nrm -rf ~"],
        "--worker-command holds a control",
    ),
    ("a blank runs folder for the workers", [*SLURM, "--runs-dir", " "], "--runs-dir is empty"),
    ("a blank env file", [*SLURM, "--env-file", " "], "--env-file is empty"),
    ("an output after -o=", [*SLURM, "-o=x.sbatch"], "-o '=x.sbatch' starts with '=': write -o x.sbatch"),
    ("a partition with a shell line in it", [*SLURM, "--partition", "gpu\nrm -rf ~"], "--partition must be one word"),
    ("a Kubernetes flag for Slurm", [*SLURM, "--image", "kvtune:1"], "--image is for --format k8s-job"),
    ("a Slurm flag for Kubernetes", [*K8S, "--time", "4:00:00"], "--time is for --format slurm"),
    (
        "the storage URL as a worker argument",
        [*SLURM, "--worker-arg=--storage=sqlite:///x.db"],
        "sets --storage itself",
    ),
    # a worker argument each worker would refuse when it starts: refused here, before a job file whose every
    # worker fails; a path is checked by its form only (it names a program on the workers' hosts, not this one)
    ("an empty llama-server for the workers", [*SLURM, "--worker-arg=--llama-server="], "--llama-server is empty"),
    ("a blank vLLM Python for the workers", [*K8S, "--worker-arg=--vllm-python= "], "--vllm-python is empty"),
    (
        "a llama-server for the workers with a newline in it",
        [*SLURM, "--worker-arg=--llama-server=/opt/llama\nrm -rf ~"],
        "--llama-server must be a path on one line",
    ),
    (
        "a worker flag mistyped",
        [*SLURM, "--worker-arg=--llama-sever=/opt/llama-server"],
        "`kvtune worker` takes no --llama-sever; did you mean --llama-server?",
    ),
    ("a worker flag without its value", [*K8S, "--worker-arg=--llama-server"], "--llama-server needs a value"),
    (
        "a worker switch given a value",
        [*SLURM, "--worker-arg=--allow-mixed-hardware=yes"],
        "--allow-mixed-hardware is a switch, it takes no value",
    ),
    ("a path as a worker argument", [*SLURM, "--worker-arg=/opt/llama-server"], "is not a `kvtune worker` flag"),
    ("a worker asked for its help", [*SLURM, "--worker-arg=--help"], "prints it and runs no trial"),
    ("a worker command that does not parse", [*SLURM, "--worker-command", 'python "oops'], "does not parse"),
    ("a job file in a folder that is not there", [*SLURM, "-o", "{o}/nope/w.sbatch"], "does not exist"),
    ("a job file that is a folder", [*SLURM, "-o", "{o}"], "is a folder"),
    ("an env file that is the script", [*SLURM, "--env-file", "{o}/workers.sbatch"], "is the script itself"),
    ("an unknown format", ["-f", "pbs", "--study", "fleet", "--workers", "2"], "unknown --format 'pbs'"),
    ("a study that is not there", [*SLURM, "--study", "nope"], "no study 'nope'"),
    ("no memory", ["-f", "slurm", "--study", "fleet", "--workers", "2"], "--mem is needed"),
    (
        "an older set-up that stored no CPUs, with no threads knob",
        [*SLURM, "--study", "nothreads"],
        "--cpus-per-worker is needed",
    ),
    ("Kubernetes without an image", [*K8S[:8], "-o", "{o}/w.yaml"], "needs --image"),
    ("a namespace Kubernetes refuses", [*K8S, "--namespace", "Tuning_1"], "--namespace must be a Kubernetes namespace"),
    ("a relative runs folder in a container", [*K8S, "--runs-dir", "runs"], "--runs-dir must be an absolute path"),
    ("a runs claim Kubernetes refuses", [*K8S, "--runs-pvc", "My Runs"], "--runs-pvc must be a Kubernetes object name"),
]


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> str:
    """Two set-up studies: `fleet` (its space tries up to 6 threads, 6 CPUs per trial), `nothreads`
    (no threads knob, set up as an older kvtune did: no CPUs per trial stored)."""
    d = tmp_path_factory.mktemp("cluster-bad-input")
    url = f"sqlite:///{d}/studies.db"
    for name, knobs in (("fleet", (Knob("threads", KnobKind.INT, low=1, high=6),)), ("nothreads", ())):
        launcher = FakeLauncher(model_path="/models/m/model.gguf")
        launcher.knobs = (*launcher.knobs, *knobs)
        spec = StudySpec(study=name, trials=5, workload=TINY).validate()
        study = set_up_study(prepare(spec, launcher=launcher, runs_dir=str(d / "runs"), cpus_per_trial=6), url)
        if name == "nothreads":  # as a kvtune from before --cpus-per-trial set it up: no CPUs stored
            placement = dict(study.user_attrs[PLACEMENT_ATTR])
            del placement["cpus_per_trial"]
            study.set_user_attr(PLACEMENT_ATTR, placement)
    return url


@pytest.mark.parametrize("what,argv,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_one_line_exit_2_and_nothing_written(storage, tmp_path, what, argv, phrase):
    args = [a.replace("{o}", str(tmp_path)) for a in argv]
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "export-workers", *args, "--storage", storage],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (what, r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and phrase in lines[0], (what, r.stderr)
    assert list(tmp_path.iterdir()) == [], f"{what}: something was written: {list(tmp_path.iterdir())}"
    assert r.stdout == "", f"{what}: a job file was printed"


def test_a_good_row_writes_both_files(storage, tmp_path):
    """The table's base arguments are good: only each row's mistake is refused."""
    args = [a.replace("{o}", str(tmp_path)) for a in SLURM]
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "export-workers", *args, "--storage", storage],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["workers.sbatch", "workers.sbatch.env"]


def test_a_worker_program_that_is_not_on_this_host_is_written_as_given(storage, tmp_path):
    """A --llama-server or --vllm-python given through --worker-arg names a program on the workers'
    hosts, which this one may not have: a path missing here is no mistake (each worker checks its
    own when it starts), and a flag and its value as two --worker-arg words are taken too."""
    args = [a.replace("{o}", str(tmp_path)) for a in SLURM]
    here_missing = str(tmp_path / "nodes-only" / "llama-server")
    worker_args = [f"--worker-arg=--llama-server={here_missing}", "--worker-arg", "--vllm-python", "--worker-arg", "py"]
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "export-workers", *args, *worker_args, "--storage", storage],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    script = (tmp_path / "workers.sbatch").read_text()
    assert f"--llama-server={here_missing}" in script and "--vllm-python py" in script, script
