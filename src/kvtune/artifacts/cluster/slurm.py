"""The sbatch script of a study's workers: a job array of N tasks, one `kvtune worker` each.

- `--array=0-(N-1)`: N workers; each task's SLURM_ARRAY_TASK_ID becomes its worker name and
  sampler seed, never a device slot.
- `--cpus-per-task`, `--mem` and `--gres=gpu:G` (G > 0): what one trial needs. Without them
  Slurm gives a task one CPU and the partition's default memory, and the server's threads fight
  over that one core. With gres Slurm sets CUDA_VISIBLE_DEVICES to the task's GPUs.
- The storage URL (with its password) is in a separate file only its owner can read (mode 0600,
  `KVTUNE_STORAGE=...`), which the script sources: it never appears in this script, in a
  command line or in `ps`. The nodes must see that file at the same path (shared file system).
- Each task keeps its server logs and pid file in a folder of its own
  (RUNS/task-<array job>_<task>): workers sharing one folder would reap each other's servers.
- Signals. scancel, preemption and the time limit send SIGTERM to every process of the job,
  the worker included: it stops its server, records its trial as interrupted and re-queues it.
  The batch shell ignores that SIGTERM (the worker already has it; a second one would cut its
  clean-up short) and stays to read the worker's exit status. `--signal=B:USR1@120` warns the
  shell alone two minutes before the time limit; it passes SIGTERM on to the worker.
- Exit status 75 (transient: the storage was unreachable after the worker's own retries): the
  task requeues itself (`scontrol requeue`, which `--requeue` allows) up to MAX_REQUEUES times,
  counted by SLURM_RESTART_COUNT. Status 2 (bad input) and anything else end the task as they
  are. `--open-mode=append` keeps the log of every run of a requeued task.
"""

from __future__ import annotations

import re
import shlex

from kvtune.artifacts.cluster.job import STORAGE_ENV, WorkerJob, check_plain, slurm_memory
from kvtune.errors import EXIT_BAD_INPUT, EXIT_TRANSIENT, SpecError

SIGNAL_LEAD_S = 120
MAX_REQUEUES = 10
DEFAULT_RUNS_DIR = "kvtune-runs"
TIME_FORMS = (
    "MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES or DAYS-HOURS:MINUTES:SECONDS"
)
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$", re.ASCII)  # not '١٢': Slurm reads ASCII


def time_limit_s(text: str) -> int:
    """Seconds in a Slurm time limit, in the forms sbatch --time reads (0 or UNLIMITED: none;
    returned as 0). Minutes and seconds after a colon are below 60, hours after a day below 24."""
    value = text.strip()
    if value.lower() in ("unlimited", "infinite"):
        return 0
    m = _TIME.match(value)
    bad = SpecError(f"--time must be a Slurm time limit: {TIME_FORMS} (e.g. 240, 4:00:00 or 1-12), got {text!r}")
    if not m:
        raise bad
    days, first, second, third = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
        if hours > 23 or minutes > 59 or seconds > 59:
            raise bad
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if third is not None:  # HH:MM:SS
        if int(second) > 59 or int(third) > 59:
            raise bad
        return (int(first) * 60 + int(second)) * 60 + int(third)
    if second is not None:  # MM:SS
        if int(second) > 59:
            raise bad
        return int(first) * 60 + int(second)
    return int(first) * 60  # MINUTES


def check_slurm(job: WorkerJob) -> WorkerJob:
    """The shared checks, then Slurm's own: a time limit it reads and that leaves the worker its
    two minutes' warning, a partition that is one word, the env file's path."""
    job = job.validate()
    if job.time_limit is not None:
        seconds = time_limit_s(job.time_limit)
        if 0 < seconds <= SIGNAL_LEAD_S:
            raise SpecError(
                f"--time {job.time_limit} is too short: the workers are told to stop {SIGNAL_LEAD_S} s before "
                "the limit, so give them more than that"
            )
    check_plain("--partition", job.partition)
    if not job.env_file or "\n" in job.env_file:
        raise SpecError("the sbatch script needs the path of its storage env file (export-workers -o FILE writes it)")
    return job


def render_env_file(storage_url: str) -> str:
    """The file the script sources (`set -a; . FILE; set +a`): KVTUNE_STORAGE, shell-quoted.
    Write it with mode 0600: it holds the database password."""
    if "\n" in storage_url or "\x00" in storage_url:
        raise SpecError("--storage must be one line")
    return (
        "# kvtune: the study's storage URL for its Slurm workers. Keep it readable by you alone (chmod 600).\n"
        f"{STORAGE_ENV}={shlex.quote(storage_url)}\n"
    )


def _directives(job: WorkerJob) -> list[str]:
    assert job.cpus is not None and job.memory_mib is not None  # check_slurm
    return [
        f"--job-name={job.job_name}",
        f"--array=0-{job.workers - 1}",
        "--ntasks=1",
        f"--cpus-per-task={job.cpus}",
        f"--mem={slurm_memory(job.memory_mib)}",
        *([f"--gres=gpu:{job.gpus_per_trial}"] if job.gpus_per_trial else []),
        *([f"--partition={job.partition}"] if job.partition else []),
        *([f"--time={job.time_limit.strip()}"] if job.time_limit else []),
        f"--output={job.job_name}-%A_%a.log",
        "--open-mode=append",
        f"--signal=B:USR1@{SIGNAL_LEAD_S}",
        "--requeue",
    ]


def _body(job: WorkerJob) -> list[str]:
    """Source the URL, start the worker in its own folder, wait for it, requeue on status 75."""
    env_file = shlex.quote(str(job.env_file))
    runs = shlex.quote(job.runs_dir or DEFAULT_RUNS_DIR)
    words = [shlex.quote(a) for a in job.worker_argv("")]
    words[len(words) - len(job.worker_args) - 1] = '"$runs_dir"'  # the value of --runs-dir: the task's folder
    argv = " ".join(words)
    devices = (
        f"# Slurm gives this task {job.gpus_per_trial} GPU(s) in CUDA_VISIBLE_DEVICES; the worker runs on them."
        if job.gpus_per_trial
        else "# A CPU study: no GPUs requested."
    )
    return [
        "set -euo pipefail",
        "# The storage URL: in a file only its owner reads, never in this script or on a command line.",
        f"env_file={env_file}",
        f'[ -r "$env_file" ] || {{ echo "kvtune: cannot read $env_file (the storage URL that export-workers'
        f' wrote): the nodes must see it at this path" >&2; exit {EXIT_BAD_INPUT}; }}',
        'set -a; . "$env_file"; set +a',
        "# A runs folder per task: workers sharing one would reap each other's servers.",
        f'runs_dir={runs}/task-"${{SLURM_ARRAY_JOB_ID:-${{SLURM_JOB_ID:-0}}}}_${{SLURM_ARRAY_TASK_ID:-0}}"',
        devices,
        "worker=",
        f"# USR1, {SIGNAL_LEAD_S} s before the time limit, comes to this shell alone: pass it on as SIGTERM.",
        'trap \'[ -n "$worker" ] && kill -TERM "$worker" 2>/dev/null || true\' USR1',
        "# scancel, preemption, the time limit: Slurm sends SIGTERM to the worker itself. This shell",
        "# stays to read the worker's exit status; the worker re-queues its trial and leaves.",
        "trap : TERM",
        f"{argv} &",
        "worker=$!",
        'while kill -0 "$worker" 2>/dev/null; do wait "$worker" || true; done',
        'status=0; wait "$worker" || status=$?',
        f'if [ "$status" -eq {EXIT_TRANSIENT} ]; then',
        f'  if [ "${{SLURM_RESTART_COUNT:-0}}" -lt {MAX_REQUEUES} ]; then',
        f'    echo "kvtune: worker exit {EXIT_TRANSIENT} (transient, e.g. storage unreachable): requeueing'
        f' task ${{SLURM_JOB_ID:-?}} (requeue $(( ${{SLURM_RESTART_COUNT:-0}} + 1 )) of {MAX_REQUEUES})" >&2',
        '    scontrol requeue "${SLURM_JOB_ID:-}" || echo "kvtune: scontrol requeue failed: task not requeued" >&2',
        "  else",
        f'    echo "kvtune: worker exit {EXIT_TRANSIENT} after {MAX_REQUEUES} requeues: this task gives up" >&2',
        "  fi",
        "fi",
        'exit "$status"',
    ]


def render_slurm(job: WorkerJob) -> str:
    """The sbatch script (submit it with `sbatch FILE`, its env file beside it)."""
    job = check_slurm(job)
    return "\n".join(
        [
            "#!/bin/bash",
            f"# kvtune workers for study {job.study}: {job.workers} array task(s). Submit: sbatch THIS_FILE",
            *(f"#SBATCH {d}" for d in _directives(job)),
            *_body(job),
            "",
        ]
    )
