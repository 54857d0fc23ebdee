"""`kvtune worker`: join a study from any host and run its trials until the budget is spent.

Started by a scheduler (a Slurm array task, a Kubernetes Indexed Job pod: `kvtune
export-workers`), the worker takes its task index as its name and pins nothing: the scheduler's
CUDA_VISIBLE_DEVICES (or the container's own GPUs) are its servers' GPUs.

A storage hiccup (a database restart, a proxy restarted) is ridden out: every storage call is
retried for up to KVTUNE_STORAGE_RETRY_S (tuner/store/retry.py) and the heartbeat survives it.
A storage still down after that exits 75 (EX_TEMPFAIL: the scheduler runs the worker again);
bad input exits 2."""

from __future__ import annotations

import os
from typing import Optional

import typer

from kvtune import hardware
from kvtune.cli.app import app, console, err_console, say_wait
from kvtune.cli.confirm import confirm_at_end
from kvtune.cli.flag_names import check_llama_server_flag, check_vllm_python_flag
from kvtune.cli.one_study import interrupt_on_sigterm
from kvtune.cli.progress import make_reporter
from kvtune.errors import KvtuneError, SpecError
from kvtune.tuner.fleet.confirmer import ends_with_confirmation
from kvtune.tuner.fleet.workers import SchedulerTask, join, scheduler_task, unbound_cpus_warning
from kvtune.tuner.store.connect import unreachable
from kvtune.tuner.trial.slots import check_gpu_slots, gpu_pool


@app.command()
def worker(
    storage: str = typer.Option(
        ...,
        envvar="KVTUNE_STORAGE",
        help="The study's Optuna storage URL, e.g. postgresql://user@db/kvtune; or set KVTUNE_STORAGE "
        "(a scheduler hands the URL, password included, through the environment instead of argv).",
    ),
    study: str = typer.Option(..., help="Study name (created by `kvtune run --storage ... --study NAME`)."),
    slot: int = typer.Option(0, help="This worker's device slot on this host (CPU set / GPUs)."),
    slots: int = typer.Option(1, help="How many workers share this host's devices."),
    gpus_per_trial: int = typer.Option(
        0,
        "--gpus-per-trial",
        help="GPUs this worker's servers get: the slot-th G of the visible GPUs (CUDA_VISIBLE_DEVICES, PCI bus order).",
    ),
    llama_server: Optional[str] = typer.Option(None, "--llama-server", help="Path to llama-server on this host."),
    vllm_python: Optional[str] = typer.Option(None, "--vllm-python", help="Python whose vLLM to run on this host."),
    runs_dir: Optional[str] = typer.Option(None, help="Where this host keeps server logs (default ./kvtune-runs)."),
    allow_mixed_hardware: bool = typer.Option(False, "--allow-mixed-hardware"),
) -> None:
    """Join a study from any host: run its trials until its budget is spent."""
    _check_flags(study, slot, slots, gpus_per_trial, llama_server, vllm_python)
    task = scheduler_task()
    if task is not None:
        _say_where(task, gpus_per_trial)
    reporter = make_reporter("plain", console, 0)
    tuner = join(
        storage,
        study,
        runs_dir=runs_dir,
        slot=slot,
        slots=slots,
        gpus_per_trial=gpus_per_trial,
        llama_server=llama_server,
        vllm_python=vllm_python,
        callbacks=reporter.callbacks(),
        allow_mixed_hardware=allow_mixed_hardware,
        task=task,
        on_wait=say_wait,
    )
    interrupt_on_sigterm()
    try:
        outcomes = tuner.run()
        if ends_with_confirmation(tuner):  # set up for a scheduler: the worker elected confirms
            confirm_at_end(tuner, storage, console)
    except KeyboardInterrupt:
        err_console.print("worker interrupted: its trial is re-queued for another worker")
        raise typer.Exit(130) from None
    except KvtuneError:  # e.g. the storage stayed unreachable through every retry: exit 75
        raise
    except Exception as e:  # a transient error outside the retried storage calls: exit 75 too
        lost = unreachable(e, storage)
        if lost is None:
            raise
        raise lost from e
    console.print(f"worker {tuner.ctx.where.slot}: study {study} has {len(outcomes)} finished trials; leaving")


def _say_where(task: SchedulerTask, gpus_per_trial: int) -> None:
    """The scheduler task this worker is and what its servers run on; a warning when Slurm
    granted fewer CPUs than the task may run on (the cluster binds none)."""
    devices = hardware.cuda_visible_devices(os.environ)
    gpus = (
        f"GPUs {','.join(devices)} (CUDA_VISIBLE_DEVICES, as the scheduler set it)"
        if devices
        else "the GPUs it was given"
    )
    console.print(f"worker: {task.describe()}; servers run on {gpus if gpus_per_trial else 'CPUs'}")
    unbound = unbound_cpus_warning(os.environ, hardware.cpu_count())
    if unbound:
        err_console.print(unbound)


def _check_flags(
    study: str, slot: int, slots: int, gpus_per_trial: int, llama_server: str | None, vllm_python: str | None
) -> None:
    """The worker's own flags, before the storage is opened: a refused worker touches nothing
    (a --llama-server or --vllm-python refused is named by that flag, not by the study's key)."""
    if not study.strip():
        raise SpecError("--study must name the study to join, got ''")
    if slots < 1:
        raise SpecError(f"--slots must be at least 1 (workers sharing this host's devices), got {slots}")
    if not 0 <= slot < slots:
        raise SpecError(f"--slot must be in 0..{slots - 1}, got {slot}")
    if gpus_per_trial < 0:
        raise SpecError(f"--gpus-per-trial must be 0 or more, got {gpus_per_trial}")
    check_gpu_slots(slots, gpus_per_trial, gpu_pool())  # this host's slots, before the study is read
    check_llama_server_flag(llama_server)
    check_vllm_python_flag(vllm_python)
