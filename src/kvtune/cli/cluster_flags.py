"""The flags of `kvtune export-workers`, declared once as a typed, immutable record
(cli/flag_record.py): what was typed, unchecked; cli/cluster.py checks it against the stored
study and writes the job file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kvtune.artifacts.cluster.job import STORAGE_ENV
from kvtune.cli.flag_record import opt

# The flags only one format reads (by field name and flag): given to the other, they would be
# ignored in silence, so they are refused.
ONLY_FOR = {
    "slurm": (("partition", "--partition"), ("time_limit", "--time"), ("env_file", "--env-file")),
    "k8s-job": (
        ("image", "--image"),
        ("namespace", "--namespace"),
        ("secret", "--secret"),
        ("secret_key", "--secret-key"),
        ("model_pvc", "--model-pvc"),
        ("model_mount", "--model-mount"),
        ("runs_pvc", "--runs-pvc"),
    ),
}


@dataclass(frozen=True)
class ExportFlags:
    """What `kvtune export-workers` was given, flag by flag (None: not given)."""

    format: str = opt(..., "--format", "-f", help="slurm (an sbatch job array) or k8s-job (an Indexed Job).")
    storage: str = opt(
        ...,
        envvar=STORAGE_ENV,
        help="The study's storage URL, as the workers reach it (or $KVTUNE_STORAGE). Written into no job file.",
    )
    study: str = opt(..., help="Study name (set up by `kvtune run --storage URL --study NAME --setup-only`).")
    workers: int = opt(..., help="How many workers: array tasks (Slurm) or pods (Kubernetes).")
    gpus_per_trial: Optional[int] = opt(
        None, "--gpus-per-trial", help="GPUs per worker (default: what --setup-only stored)."
    )
    cpus: Optional[int] = opt(
        None,
        "--cpus-per-worker",
        "--cpus-per-task",
        help="CPUs per worker: Slurm --cpus-per-task, Kubernetes cpu requests = limits (default: the most "
        "threads the study's space tries; needed when it has no threads knob, e.g. vLLM).",
    )
    mem: Optional[str] = opt(
        None,
        "--mem",
        "--mem-per-worker",
        help="Memory per worker, e.g. 64G (binary units): Slurm --mem, Kubernetes memory requests = limits. Required.",
    )
    worker_arg: list[str] = opt(
        [],
        "--worker-arg",
        help="An extra `kvtune worker` argument, e.g. --worker-arg=--llama-server=/opt/llama-server.",
    )
    runs_dir: Optional[str] = opt(
        None,
        help="Where workers keep server logs, a folder per task inside "
        "(default: Slurm ./kvtune-runs, Kubernetes /kvtune-runs).",
    )
    partition: Optional[str] = opt(None, help="Slurm partition.")
    time_limit: Optional[str] = opt(
        None, "--time", help="Slurm time limit: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS."
    )
    env_file: Optional[Path] = opt(
        None, "--env-file", help="Slurm: the 0600 file holding the storage URL (default: the script's name + .env)."
    )
    image: Optional[str] = opt(None, help="Kubernetes: an image with kvtune and the backend.")
    namespace: Optional[str] = opt(None, help="Kubernetes namespace of the Job and its Secret (default: default).")
    secret: Optional[str] = opt(None, help="Kubernetes Secret holding the storage URL (default: kvtune-storage).")
    secret_key: Optional[str] = opt(None, help="The key of the URL in that Secret (default: url).")
    model_pvc: Optional[str] = opt(None, help="Kubernetes PersistentVolumeClaim holding the model.")
    model_mount: Optional[str] = opt(
        None, help="Where that claim is mounted (default: the directory of the study's model path)."
    )
    runs_pvc: Optional[str] = opt(
        None, help="Kubernetes PersistentVolumeClaim for the runs folder (default: an emptyDir per pod)."
    )
    worker_command: Optional[str] = opt(
        None,
        "--worker-command",
        help="What starts one worker instead of `kvtune worker` (Slurm: this venv's; tests pass a fake).",
    )
    output: Optional[Path] = opt(None, "--output", "-o", help="File to write (default: print).")
