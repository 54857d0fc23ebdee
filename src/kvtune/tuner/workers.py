"""Many trials at once: workers that share one study through Optuna's RDB storage.

There is no scheduler: each worker runs the same ask -> launch -> measure -> tell loop against
the shared storage, which hands each trial to exactly one of them. A worker owns a device slot
(a CPU set its servers are pinned to, or the GPUs named by CUDA_VISIBLE_DEVICES) and takes free
ports from the OS. The study stores its own spec, so a worker on another host needs only the
storage URL and the study name. A worker that dies leaves a trial that another re-runs
(heartbeats across hosts, dead-process detection on the same host: see `Tuner._recover`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from kvtune.bench.workload import Workload
from kvtune.errors import SpecError
from kvtune.tuner import storage
from kvtune.tuner.build import open_tuner, prepare
from kvtune.tuner.loop import Callbacks, Tuner
from kvtune.tuner.spec import StudySpec


def spec_from_dict(d: dict) -> StudySpec:
    known = {f.name for f in fields(StudySpec)}
    values = {k: v for k, v in d.items() if k in known}
    wl = values.pop("workload", {}) or {}
    wl_known = {f.name for f in fields(Workload)}
    values["workload"] = Workload(**{k: v for k, v in wl.items() if k in wl_known})
    return StudySpec(**values).validate()


def cpu_slot(slot: int, slots: int) -> set[int] | None:
    """This worker's share of the CPUs this process may use (contiguous groups); None for one
    worker (no pinning). More workers than CPUs share CPUs round-robin."""
    if slots <= 1:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if slots >= len(cpus):
        return {cpus[slot % len(cpus)]}
    size = len(cpus) // slots
    return set(cpus[slot * size:(slot + 1) * size])


def gpu_slot(slot: int, gpus_per_trial: int) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for this worker's servers (not recorded in the trial's env: the
    deployed server uses whatever GPUs the deployment gives it)."""
    if gpus_per_trial <= 0:
        return {}
    ids = range(slot * gpus_per_trial, (slot + 1) * gpus_per_trial)
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, ids))}


def join(storage_url: str, study_name: str, *, launcher: Any = None, runs_dir: str | None = None,
         slot: int = 0, slots: int = 1, gpus_per_trial: int = 0, llama_server: str | None = None,
         vllm_python: str | None = None,
         callbacks: Callbacks | None = None, allow_mixed_hardware: bool = False,
         wait_for_others: bool = False) -> Tuner:
    """A Tuner for an existing study, built from the spec stored in it."""
    study = storage.load_study(study_name, storage_url)
    if "spec" not in study.user_attrs:
        raise SpecError(f"study {study_name!r} was not created by kvtune (no stored spec)")
    spec = spec_from_dict(study.user_attrs["spec"])
    # Binaries and environments are this host's: the creator's paths may not exist here.
    spec.llama_server = llama_server
    spec.vllm_python = vllm_python
    prepared = prepare(spec, launcher=launcher, runs_dir=runs_dir)
    tuner = open_tuner(prepared, callbacks, storage_url=storage_url,
                       allow_mixed_hardware=allow_mixed_hardware, slot=slot,
                       cpus=cpu_slot(slot, slots), wait_for_others=wait_for_others,
                       device_env=gpu_slot(slot, gpus_per_trial))
    return tuner


def worker_flags(spec: StudySpec, *, runs_dir: str | None, gpus_per_trial: int,
                 allow_mixed_hardware: bool) -> list[str]:
    """The `kvtune worker` flags that make a spawned worker run trials as this process does."""
    return (["--gpus-per-trial", str(gpus_per_trial)]
            + (["--runs-dir", runs_dir] if runs_dir else [])
            + (["--llama-server", spec.llama_server] if spec.llama_server else [])
            + (["--vllm-python", spec.vllm_python] if spec.vllm_python else [])
            + (["--allow-mixed-hardware"] if allow_mixed_hardware else []))


def spawn(n: int, storage_url: str, study_name: str, run_dir: Path, extra: list[str]) -> list[subprocess.Popen]:
    """Start workers for slots 1..n-1 (slot 0 is the calling process); their output goes to
    run_dir/worker-<slot>.log. They get the kernel's parent-death signal like servers do."""
    from kvtune.launchers.process import _die_with_parent

    procs = []
    for slot in range(1, n):
        log = open(run_dir / f"worker-{slot}.log", "ab")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "kvtune.cli", "worker", "--storage", storage_url, "--study", study_name,
             "--slot", str(slot), "--slots", str(n), *extra],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent))
        log.close()
    return procs
