"""The sbatch script of a study's workers: a job array of N tasks, one `kvtune worker` each.

- `--array=0-(N-1)`: N workers; each task's SLURM_ARRAY_TASK_ID becomes its worker name and
  sampler seed, never a device slot.
- `--gres=gpu:G` for a study whose trials use G GPUs (none for a CPU study): Slurm then sets
  CUDA_VISIBLE_DEVICES to the task's GPUs, and the worker runs its servers on exactly those.
- `--signal=B:TERM@120`: two minutes before the time limit the batch shell gets SIGTERM. The
  shell `exec`s the worker, so the worker is that shell: it stops its server, records the
  trial as interrupted and re-queues it for another worker. `scancel` and preemption send
  SIGTERM too (then SIGKILL after the cluster's KillWait / GraceTime): the same path.
- No `--requeue`: the study re-queues the trial; the job array need not run the task again.
"""

from __future__ import annotations

import shlex

from kvtune.artifacts.cluster.job import WorkerJob

SIGNAL_LEAD_S = 120


def render_slurm(job: WorkerJob) -> str:
    """The sbatch script (submit it with `sbatch FILE`)."""
    job = job.validate()
    directives = [
        f"--job-name={job.job_name}",
        f"--array=0-{job.workers - 1}",
        "--ntasks=1",
        *([f"--gres=gpu:{job.gpus_per_trial}"] if job.gpus_per_trial else []),
        *([f"--cpus-per-task={job.cpus_per_task}"] if job.cpus_per_task else []),
        *([f"--partition={job.partition}"] if job.partition else []),
        *([f"--time={job.time_limit}"] if job.time_limit else []),
        f"--output={job.job_name}-%A_%a.log",
        f"--signal=B:TERM@{SIGNAL_LEAD_S}",
    ]
    argv = " ".join(shlex.quote(a) for a in job.worker_argv(job.storage_url))
    devices = (
        f"# Slurm gives this task {job.gpus_per_trial} GPU(s) in CUDA_VISIBLE_DEVICES; the worker runs on them."
        if job.gpus_per_trial
        else "# A CPU study: no GPUs requested."
    )
    return "\n".join(
        [
            "#!/bin/bash",
            f"# kvtune workers for study {job.study}: {job.workers} array task(s). Submit: sbatch THIS_FILE",
            *(f"#SBATCH {d}" for d in directives),
            "set -euo pipefail",
            devices,
            "# exec: the worker is the batch shell, so scancel, preemption and the time limit's",
            "# SIGTERM reach it; it re-queues its running trial for another worker and leaves.",
            f"exec {argv}",
            "",
        ]
    )
