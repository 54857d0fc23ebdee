"""A worker's share of this host's devices: its slot's CPU set and GPUs.

`kvtune run --workers N` runs N workers on one host, each in a slot (slot 0 is the process that
runs the study). A slot's servers are pinned to its CPUs (contiguous groups of the CPUs this
process may use) and, with --gpus-per-trial G, to its G GPUs, named by CUDA_VISIBLE_DEVICES and
recorded with each trial. GPUs are cut from the ones this process may use (its own
CUDA_VISIBLE_DEVICES, else every GPU NVML sees), in PCI bus order so that CUDA's indices are
NVML's (the memory wait and the pre-screen read the slot's GPUs through NVML).
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from kvtune import hardware
from kvtune.errors import SpecError


def cpu_slot(slot: int, slots: int) -> set[int] | None:
    """This worker's share of the CPUs this process may use (contiguous groups); None for one
    worker (no pinning). More workers than CPUs share CPUs round-robin."""
    if slots <= 1:
        return None
    cpus = list(hardware.cpu_ids())
    if slots >= len(cpus):
        return {cpus[slot % len(cpus)]}
    size = len(cpus) // slots
    return set(cpus[slot * size : (slot + 1) * size])


def gpu_pool(env: Mapping[str, str] | None = None, gpu_count: int | None = None) -> list[str]:
    """The GPUs worker slots are cut from: this process's CUDA_VISIBLE_DEVICES when set (indices
    or UUIDs, as given), else 0..N-1 for the N GPUs NVML sees (`gpu_count` injects N)."""
    env = os.environ if env is None else env
    given = hardware.cuda_visible_devices(env)
    if given is not None:
        return given
    n = len(hardware.gpu_report().gpus) if gpu_count is None else gpu_count
    return [str(i) for i in range(n)]


def check_gpu_slots(workers: int, gpus_per_trial: int, pool: Sequence[str]) -> None:
    """`SpecError` (one line) when `workers` slots of `gpus_per_trial` GPUs do not fit the pool."""
    need = workers * gpus_per_trial
    if gpus_per_trial > 0 and need > len(pool):
        have = f"{len(pool)} GPU(s) visible ({', '.join(pool)})" if pool else "no GPU visible (NVML sees none)"
        raise SpecError(
            f"--gpus-per-trial {gpus_per_trial} x --workers {workers} needs {need} GPUs, "
            f"but this host has {have}: lower --gpus-per-trial or --workers"
        )


def gpu_slot(slot: int, gpus_per_trial: int, pool: Sequence[str] | None = None) -> dict[str, str]:
    """The environment that pins this worker's servers to its slot's GPUs: CUDA_VISIBLE_DEVICES
    (the slot's share of `pool`, by default `gpu_pool()`) and CUDA_DEVICE_ORDER=PCI_BUS_ID. The
    loop records it with each trial (`TrialOutcome.device_env`): bash and systemd exports carry
    it, containers do not (a container's reserved GPUs are its own 0..G-1)."""
    if gpus_per_trial <= 0:
        return {}
    pool = gpu_pool() if pool is None else pool
    check_gpu_slots(slot + 1, gpus_per_trial, pool)
    ids = pool[slot * gpus_per_trial : (slot + 1) * gpus_per_trial]
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(ids)}
