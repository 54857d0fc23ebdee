"""`kvtune export-workers`: the scheduler file that places a set-up study's workers.

The study was created in shared storage by `kvtune run ... --storage URL --setup-only`; this
reads it back (its spec, its GPUs per trial) and writes an sbatch job array (slurm) or a
Kubernetes Indexed Job (k8s-job) of N `kvtune worker` processes. Rendering lives in
artifacts/cluster/; this module only gathers the options and the stored study.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from kvtune.artifacts.cluster.job import CLUSTER_FORMATS, WorkerJob
from kvtune.artifacts.cluster.k8s import render_k8s_job
from kvtune.artifacts.cluster.slurm import render_slurm
from kvtune.cli.app import app, err_console
from kvtune.errors import SpecError
from kvtune.tuner.fleet.setup import read_set_up


def default_command(format: str) -> tuple[str, ...]:
    """Slurm: the kvtune beside this Python (its venv's bin/), which the nodes must see at that
    path (a shared file system). Kubernetes: the image's `kvtune` on its PATH."""
    if format == "k8s-job":
        return ("kvtune", "worker")
    return (str(Path(sys.executable).parent / "kvtune"), "worker")


@app.command("export-workers")
def export_workers(
    format: str = typer.Option(..., "--format", "-f", help="slurm (an sbatch job array) or k8s-job (an Indexed Job)."),
    storage: str = typer.Option(..., help="The study's storage URL, as the workers reach it."),
    study: str = typer.Option(..., help="Study name (set up by `kvtune run --storage URL --study NAME --setup-only`)."),
    workers: int = typer.Option(..., help="How many workers: array tasks (Slurm) or pods (Kubernetes)."),
    gpus_per_trial: Optional[int] = typer.Option(
        None, "--gpus-per-trial", help="GPUs per worker (default: what --setup-only stored)."
    ),
    worker_arg: list[str] = typer.Option(
        [],
        "--worker-arg",
        help="An extra `kvtune worker` argument, e.g. --worker-arg=--llama-server=/opt/llama-server.",
    ),
    runs_dir: Optional[str] = typer.Option(None, help="Where workers keep server logs (default ./kvtune-runs)."),
    partition: Optional[str] = typer.Option(None, help="Slurm partition."),
    time_limit: Optional[str] = typer.Option(None, "--time", help="Slurm time limit, e.g. 4:00:00."),
    cpus_per_task: Optional[int] = typer.Option(None, help="Slurm CPUs per worker."),
    image: Optional[str] = typer.Option(None, help="Kubernetes: an image with kvtune and the backend."),
    namespace: Optional[str] = typer.Option(None, help="Kubernetes namespace."),
    secret: str = typer.Option("kvtune-storage", help="Kubernetes Secret holding the storage URL."),
    secret_key: str = typer.Option("url", help="The key of the URL in that Secret."),
    model_pvc: Optional[str] = typer.Option(None, help="Kubernetes PersistentVolumeClaim holding the model."),
    model_mount: Optional[str] = typer.Option(
        None, help="Where that claim is mounted (default: the directory of the study's model path)."
    ),
    worker_command: Optional[str] = typer.Option(
        None,
        "--worker-command",
        help="What starts one worker instead of `kvtune worker` (Slurm: this venv's; tests pass a fake).",
    ),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="File to write (default: print)."),
) -> None:
    """Write the Slurm or Kubernetes file that runs a set-up study's workers."""
    if format not in CLUSTER_FORMATS:
        raise SpecError(f"unknown --format {format!r}: use one of {', '.join(CLUSTER_FORMATS)}")
    stored = read_set_up(study, storage)
    job = WorkerJob(
        study=study,
        storage_url=storage,
        workers=workers,
        gpus_per_trial=stored.gpus_per_trial if gpus_per_trial is None else gpus_per_trial,
        command=tuple(shlex.split(worker_command)) if worker_command else default_command(format),
        worker_args=tuple(worker_arg),
        runs_dir=runs_dir,
        partition=partition,
        time_limit=time_limit,
        cpus_per_task=cpus_per_task,
        image=image,
        namespace=namespace,
        storage_secret=secret,
        storage_secret_key=secret_key,
        model_pvc=model_pvc,
        model_mount=model_mount,
    )
    text = render_slurm(job) if format == "slurm" else render_k8s_job(job, stored.model_path)
    if output is None:
        print(text, end="")
        return
    output.write_text(text)
    if format == "slurm":
        output.chmod(0o755)
    submit = f"sbatch {output}" if format == "slurm" else f"kubectl apply -f {output}"
    err_console.print(f"wrote {output} ({workers} workers for study {study}): submit with `{submit}`")
