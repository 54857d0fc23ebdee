"""The GPUs one trial's server uses: what its price per GPU-hour bills and its energy meter reads.

A server sees the GPUs its CUDA_VISIBLE_DEVICES names (the shell's, unless the worker's slot or
the candidate's environment sets it; unset: every GPU NVML lists) and uses the first N of them
for a world of N ranks (vLLM's tensor x pipeline x data parallel sizes; a backend that says
nothing uses all it is given, as llama-server splits a model over every GPU it sees). Billing
every GPU of the host would charge a TP=1 trial on an 8-GPU box for 8 and leave
``cost_per_mtok`` unable to reward fewer GPUs; metering them all would add the idle boards and
the other workers' servers to the trial's joules.

CUDA_VISIBLE_DEVICES is read as CUDA reads it: entries are indices or GPU UUIDs (``GPU-`` and
a unique prefix of the UUID), in that order, and the list ends at the first entry CUDA would
reject (an index past the last GPU, a UUID no GPU has). Indices are NVML's (PCI bus order):
kvtune's worker slots set CUDA_DEVICE_ORDER=PCI_BUS_ID so they agree; on a host of mixed GPUs
whose shell sets plain indices without it, CUDA may number the boards differently (the count
billed is right either way). A MIG instance (``MIG-...``) counts as one GPU but has no board of
its own to meter, so such a trial's energy is not measured rather than measured wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from kvtune.nvml import GpuDevice

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class TrialGpus:
    """`count`: the GPUs a trial's server uses (what a per-GPU price bills); `indices`: their NVML
    indices, the boards to meter (None: some cannot be named to NVML, e.g. a MIG instance, or
    NVML is not readable here)."""

    count: int
    indices: tuple[int, ...] | None

    @property
    def meterable(self) -> bool:
        return self.count == 0 or self.indices is not None


def visible(value: str | None, devices: Sequence[GpuDevice]) -> list[int | None]:
    """The GPUs a CUDA_VISIBLE_DEVICES value leaves visible, in its order, as NVML indices (None:
    visible but not an NVML board, e.g. a MIG instance, or NVML lists nothing to check against).
    Unset: every GPU NVML lists."""
    if value is None:
        return [d.index for d in devices]
    known = {d.index for d in devices}
    out: list[int | None] = []
    for entry in (p.strip() for p in value.split(",")):
        if not entry:
            break
        if entry.isdigit():
            index = int(entry)
            if devices and index not in known:
                break  # CUDA ignores this entry and every one after it
            out.append(index if devices else None)
        elif entry.startswith("GPU-") and devices:
            matches = [d.index for d in devices if d.uuid and d.uuid.startswith(entry)]
            if len(matches) != 1:
                break
            out.append(matches[0])
        elif entry.startswith(("GPU-", "MIG-")):
            out.append(None)
        else:
            break
    return out


def trial_gpus(env: Mapping[str, str], world_size: int | None, devices: Sequence[GpuDevice]) -> TrialGpus:
    """The GPUs a server started with environment `env` uses when it runs `world_size` ranks (None:
    all it sees); `devices`: the GPUs NVML lists on this host (empty: NVML not readable)."""
    seen = visible(env.get(CUDA_VISIBLE_DEVICES), devices)
    used = seen if world_size is None else seen[: max(world_size, 0)]
    indices = [i for i in used if i is not None]
    return TrialGpus(len(used), tuple(indices) if len(indices) == len(used) else None)
