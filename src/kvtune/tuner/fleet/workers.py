"""Many trials at once: workers that share one study through Optuna's RDB storage.

There is no scheduler: each worker runs the same ask -> launch -> measure -> tell loop against
the shared storage, which hands each trial to exactly one of them; what they need of each other
is their coordinator's (tuner/fleet/shared.py). A worker owns a device slot (a CPU set its
servers are pinned to and its GPUs: tuner/trial/slots.py) and takes free ports from the OS. The
study stores its own spec, so a worker on another host needs only the storage URL and the study
name. A worker that dies leaves a trial that another re-runs (heartbeats across hosts,
dead-process detection on the same host: see tuner/fleet/recovery.py).

Under a scheduler (a Slurm array task, a Kubernetes Indexed Job pod) the worker pins nothing
itself: the scheduler already gave the job its GPUs (Slurm's CUDA_VISIBLE_DEVICES, the kubelet's
devices) and CPUs, so the job is one whole slot, and its task index is only its name (the slot
recorded with its trials, its server pid file) and its sampler seed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from kvtune import hardware
from kvtune.commands import STORAGE_ENV
from kvtune.errors import SpecError
from kvtune.interference.monitor import FAMILY_ENV
from kvtune.launchers.process import die_with_parent
from kvtune.study.spec import StudySpec
from kvtune.tuner.assemble import open_tuner, prepare
from kvtune.tuner.fleet.setup import PLACEMENT_ATTR, stored_cpus_per_trial
from kvtune.tuner.fleet.shared import Shared
from kvtune.tuner.loop import Callbacks, Tuner
from kvtune.tuner.store import storage
from kvtune.tuner.trial.disturbance import MonitorFactory
from kvtune.tuner.trial.slots import cpu_slot, gpu_slot

if TYPE_CHECKING:
    from kvtune.launchers.base import Launcher


@dataclass(frozen=True)
class SchedulerTask:
    """This process as one task of a scheduler's job: `index` is its array index."""

    scheduler: str  # "slurm" or "kubernetes"
    index: int
    job: str

    def describe(self) -> str:
        what = "array task" if self.scheduler == "slurm" else "completion index"
        return f"{self.scheduler} job {self.job}, {what} {self.index}"


def _index(env: Mapping[str, str], name: str) -> int:
    text = env.get(name, "0")
    if not text.isdigit():
        raise SpecError(f"{name}={text!r} is not a task index (0, 1, ...): this worker's scheduler set it")
    return int(text)


def scheduler_task(env: Mapping[str, str] | None = None) -> SchedulerTask | None:
    """The scheduler task this process is (Kubernetes: JOB_COMPLETION_INDEX; Slurm:
    SLURM_ARRAY_TASK_ID, 0 for a job without an array), None when none placed it."""
    env = os.environ if env is None else env
    if "JOB_COMPLETION_INDEX" in env:
        return SchedulerTask("kubernetes", _index(env, "JOB_COMPLETION_INDEX"), env.get("HOSTNAME", "?"))
    if "SLURM_JOB_ID" in env:
        job = env.get("SLURM_ARRAY_JOB_ID") or env["SLURM_JOB_ID"]
        return SchedulerTask("slurm", _index(env, "SLURM_ARRAY_TASK_ID"), job)
    return None


def unbound_cpus_warning(env: Mapping[str, str], process_cpus: int) -> str | None:
    """A line for a Slurm task that may run on more CPUs than it was granted (a cluster whose
    TaskPlugin binds nothing): its servers are pinned to the first CPUs of what it sees, and so
    are those of every other task on the node: their trials would share cores. None when the
    task sees what it was granted (task/affinity or task/cgroup bound it) or Slurm did not place it."""
    granted = env.get("SLURM_CPUS_PER_TASK", "")
    if "SLURM_JOB_ID" not in env or not granted.isdigit() or process_cpus <= int(granted):
        return None
    return (
        f"warning: Slurm granted this task {granted} CPU(s) but it may run on {process_cpus}: the cluster binds "
        "no CPUs (TaskPlugin task/none), so tasks on one node pin their servers to the same first CPUs and "
        "their measurements share cores; ask the admins for task/affinity or task/cgroup, or run one task per node"
    )


@dataclass(frozen=True)
class Seat:
    """Where a worker sits: `slot` names it (its trials, its pid file, its sampler seed); `cpus`
    and `device_env` are what its servers are pinned to (None / {}: what the process has)."""

    slot: int
    cpus: set[int] | None
    device_env: dict[str, str]


def seat(
    slot: int, slots: int, gpus_per_trial: int, task: SchedulerTask | None, pool: Sequence[str] | None = None
) -> Seat:
    """This worker's seat. On its own host it is slot `slot` of `slots` (CPU set and GPUs cut
    from the host's); placed by a scheduler it is the task's index, on everything the task got:
    its first `gpus_per_trial` visible GPUs are all of them, and no CPU set."""
    if task is None:
        return Seat(slot, cpu_slot(slot, slots), gpu_slot(slot, gpus_per_trial, pool))
    if slots > 1 or slot != 0:
        raise SpecError(
            f"this worker is {task.describe()}: the scheduler places one worker per task, so drop --slot and --slots"
        )
    return Seat(task.index, None, gpu_slot(0, gpus_per_trial, pool))


def cpus_for_trials(per_trial: int, seat_cpus: set[int] | None, host_cpus: Sequence[int]) -> set[int]:
    """The CPUs this worker's servers are pinned to in a study whose trials get `per_trial` CPUs:
    the first `per_trial` of its seat (or of what the process may run on). Fewer is a one-line
    refusal naming the difference: a trial on fewer cores is another hardware class, and more
    would measure configs the rest of the study never had."""
    mine = sorted(seat_cpus) if seat_cpus is not None else sorted(host_cpus)
    if len(mine) < per_trial:
        raise SpecError(
            f"this worker has {len(mine)} CPU(s), the study's trials get {per_trial} (--cpus-per-trial at set-up): "
            f"give the worker {per_trial} CPUs (sbatch --cpus-per-task {per_trial}, a pod's cpu request), "
            f"or set up a study for {len(mine)}"
        )
    return set(mine[:per_trial])


def join(
    storage_url: str,
    study_name: str,
    *,
    launcher: Launcher | None = None,
    runs_dir: str | None = None,
    slot: int = 0,
    slots: int = 1,
    gpus_per_trial: int = 0,
    llama_server: str | None = None,
    vllm_python: str | None = None,
    callbacks: Callbacks | None = None,
    allow_mixed_hardware: bool = False,
    monitor: MonitorFactory | None = None,
    task: SchedulerTask | None = None,
    host_cpus: Sequence[int] | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Tuner:
    """A Tuner for an existing study, built from the spec stored in it (`monitor`: the
    interference monitor, see tuner/trial/disturbance.py; `task`: the scheduler task this
    worker is, see `seat`; `host_cpus`: the CPUs this process may run on, injected by tests;
    `on_wait`: says a storage slow to answer, storage.py `make_storage`).
    A study set up with its CPUs per trial (tuner/fleet/setup.py) is joined with its own space,
    whatever this host has: see `cpus_for_trials`. The worker shares the study
    (tuner/fleet/shared.py): it leaves when nothing is left to ask, unless the study was set up
    for a scheduler (then it stays while trials run elsewhere)."""
    where = seat(slot, slots, gpus_per_trial, task)
    study = storage.load_study(study_name, storage_url, on_wait=on_wait)
    if "spec" not in study.user_attrs:
        raise SpecError(f"study {study_name!r} was not created by kvtune (no stored spec)")
    spec = StudySpec.from_dict(study.user_attrs["spec"]).validate()
    # Binaries and environments are this host's: the creator's paths may not exist here.
    spec.llama_server = llama_server
    spec.vllm_python = vllm_python
    per_trial = stored_cpus_per_trial(study.user_attrs.get(PLACEMENT_ATTR) or {})
    if per_trial is not None:  # the study's space, whatever this host has; servers pinned to it
        where = replace(where, cpus=cpus_for_trials(per_trial, where.cpus, host_cpus or hardware.cpu_ids()))
    prepared = prepare(
        spec, launcher=launcher, runs_dir=runs_dir, device_env=where.device_env, cpus_per_trial=per_trial
    )
    return open_tuner(
        prepared,
        callbacks,
        storage_url=storage_url,
        allow_mixed_hardware=allow_mixed_hardware,
        slot=where.slot,
        cpus=where.cpus,
        device_env=where.device_env,
        monitor=monitor,
        # no creator waits on a study set up for a scheduler: its workers stay while trials run
        coordinate=partial(Shared, summarizes=False, stays=PLACEMENT_ATTR in study.user_attrs),
    )


@dataclass(frozen=True)
class WorkerOptions:
    """What a spawned worker needs from the run that starts it, beside the study itself: this
    host's binaries and folders, the GPUs per trial and the mixed-hardware permission."""

    gpus_per_trial: int = 0
    runs_dir: str | None = None
    llama_server: str | None = None
    vllm_python: str | None = None
    allow_mixed_hardware: bool = False


def worker_argv(study_name: str, slot: int, slots: int, options: WorkerOptions) -> list[str]:
    """The `kvtune worker` command line for one slot (what `spawn` starts). No storage URL: it
    holds the database password, and a command line is readable by every user of the host;
    the worker reads it from its environment (`worker_environment`)."""
    o = options
    return [
        sys.executable,
        "-m",
        "kvtune.cli",
        "worker",
        "--study",
        study_name,
        "--slot",
        str(slot),
        "--slots",
        str(slots),
        "--gpus-per-trial",
        str(o.gpus_per_trial),
        *(["--runs-dir", o.runs_dir] if o.runs_dir else []),
        *(["--llama-server", o.llama_server] if o.llama_server else []),
        *(["--vllm-python", o.vllm_python] if o.vllm_python else []),
        *(["--allow-mixed-hardware"] if o.allow_mixed_hardware else []),
    ]


def worker_environment(storage_url: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A spawned worker's environment: this process's (`env`), the storage URL as
    KVTUNE_STORAGE (read by `kvtune worker`, never passed to its servers: commands.py
    `child_environment`), and this process as its family (its siblings are not interference)."""
    return {**(os.environ if env is None else env), STORAGE_ENV: storage_url, FAMILY_ENV: str(os.getpid())}


def spawn(n: int, storage_url: str, study_name: str, run_dir: Path, options: WorkerOptions) -> list[subprocess.Popen]:
    """Start workers for slots 1..n-1 (slot 0 is the calling process); their output goes to
    run_dir/worker-<slot>.log. They get the kernel's parent-death signal like servers do."""
    procs = []
    for slot in range(1, n):
        with open(run_dir / f"worker-{slot}.log", "ab") as log:
            procs.append(
                subprocess.Popen(
                    worker_argv(study_name, slot, n, options),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=die_with_parent,
                    env=worker_environment(storage_url),
                )
            )
    return procs
