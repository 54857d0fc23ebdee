"""What a scheduler needs to place a study's workers, whichever scheduler it is.

The study already lives in shared storage with its spec (`kvtune run --setup-only`), so each
worker needs only the storage URL and the study name: the scheduler starts N copies of one
`kvtune worker` command line and gives each its own GPUs. The worker pins nothing itself under a
scheduler: it runs its servers on the GPUs the scheduler granted (Slurm's CUDA_VISIBLE_DEVICES,
the kubelet's devices) and takes its array index only as its name and sampler seed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kvtune.errors import SpecError

CLUSTER_FORMATS = ("slurm", "k8s-job")
# A scheduler's job name: DNS-1123 for Kubernetes, and a safe file name for Slurm's logs.
_NAME_UNSAFE = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class WorkerJob:
    """One study's workers as a scheduler job. `command` is what starts one worker (default the
    kvtune beside this Python, which must exist at the same path on the nodes, e.g. a venv on a
    shared file system); `worker_args` are extra `kvtune worker` flags (--llama-server PATH)."""

    study: str
    storage_url: str
    workers: int
    gpus_per_trial: int = 0
    command: tuple[str, ...] = ("kvtune", "worker")
    worker_args: tuple[str, ...] = ()
    runs_dir: str | None = None
    # Slurm
    partition: str | None = None
    time_limit: str | None = None
    cpus_per_task: int | None = None
    # Kubernetes
    image: str | None = None
    namespace: str | None = None
    storage_secret: str = "kvtune-storage"
    storage_secret_key: str = "url"
    model_pvc: str | None = None
    model_mount: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def validate(self) -> "WorkerJob":
        if self.workers < 1:
            raise SpecError(f"--workers must be at least 1, got {self.workers}")
        if self.gpus_per_trial < 0:
            raise SpecError(f"--gpus-per-trial must be 0 or more, got {self.gpus_per_trial}")
        if not self.command:
            raise SpecError("--worker-command must name a program")
        if self.cpus_per_task is not None and self.cpus_per_task < 1:
            raise SpecError(f"--cpus-per-task must be at least 1, got {self.cpus_per_task}")
        return self

    @property
    def job_name(self) -> str:
        """`kvtune-<study>` made safe for both schedulers (lower case, digits, dashes)."""
        safe = _NAME_UNSAFE.sub("-", self.study.lower()).strip("-") or "study"
        return f"kvtune-{safe}"[:52].rstrip("-")

    def worker_argv(self, storage_url: str) -> list[str]:
        """One worker's command line, storage URL as given (Kubernetes passes $(VAR))."""
        return [
            *self.command,
            "--storage",
            storage_url,
            "--study",
            self.study,
            *(["--gpus-per-trial", str(self.gpus_per_trial)] if self.gpus_per_trial else []),
            *(["--runs-dir", self.runs_dir] if self.runs_dir else []),
            *self.worker_args,
        ]
