"""The one place kvtune talks to NVML: what the GPUs are, how much memory they have free, how
they are linked to each other.

NVML (nvidia-ml-py, ``import pynvml``) is optional, so it is imported lazily and reading never
raises: no package, no driver, no GPU or a call the driver does not support means fewer facts,
never a traceback. Everything goes through the `Nvml` protocol, the few pynvml functions kvtune
calls, so the `pynvml` module itself is the real reader and `kvtune.testing.nvml_recorded.Recorded`
replays answers recorded on a real machine (``python -m kvtune.nvml > host.json``); tests inject
recordings instead of patching. What the answers mean (names, spec-sheet bandwidths) is `hardware`'s and the planner's
business: this module only reads.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, TypeVar

from kvtune.kinds import StrEnum

# NVML ABI constants (nvml.h), the same numbers pynvml exports.
P2P_CAPS_INDEX_NVLINK = 2
P2P_STATUS_OK = 0
# nvmlGpuTopologyLevel_t -> nvidia-smi topo's label for a PCIe path between two GPUs.
TOPOLOGY_LABELS = {0: "same board", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

T = TypeVar("T")


class Nvml(Protocol):
    """The pynvml functions kvtune calls; the `pynvml` module satisfies it as it is. A handle is
    whatever `nvmlDeviceGetHandleByIndex` returns. Any call may raise (pynvml's NVMLError)."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str | bytes: ...
    def nvmlSystemGetCudaDriverVersion(self) -> int: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...  # "GPU-8a1b...", as CUDA_VISIBLE_DEVICES names it
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...  # .total, .free (bytes)
    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]: ...
    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int: ...
    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int: ...
    def nvmlDeviceGetP2PStatus(self, a: Any, b: Any, index: int) -> int: ...
    def nvmlDeviceGetTopologyCommonAncestor(self, a: Any, b: Any) -> int: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...  # .pid, .usedGpuMemory
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int: ...  # mJ (Volta and later)
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...  # mW, board power
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...  # .gpu, .memory (%)
    # samples newer than last_seen (us): .pid, .timeStamp, .smUtil, .memUtil (%)
    def nvmlDeviceGetProcessUtilization(self, handle: Any, last_seen: int) -> list[Any]: ...


class Interconnect(StrEnum):
    NVLINK = "NVLink"
    PCIE = "PCIe"


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    memory_total_bytes: int
    memory_free_bytes: int
    compute_capability: str | None = None  # "9.0"
    pcie_generation: int | None = None  # the most the device and this slot allow
    pcie_width: int | None = None
    uuid: str | None = None  # "GPU-...": a CUDA_VISIBLE_DEVICES entry may name the GPU by it

    @property
    def memory_used_fraction(self) -> float:
        """Share of memory already taken (by other processes, when kvtune has started nothing)."""
        if self.memory_total_bytes <= 0:
            return 0.0
        return 1.0 - self.memory_free_bytes / self.memory_total_bytes


@dataclass(frozen=True)
class GpuPair:
    """How GPUs `a` and `b` reach each other: NVLink when NVML reports NVLink peer-to-peer,
    else PCIe; `pcie_path` is the PCIe route as nvidia-smi topo names it (PIX, PXB, PHB, NODE,
    SYS), None when the driver did not say."""

    a: int
    b: int
    interconnect: Interconnect
    pcie_path: str | None = None


@dataclass(frozen=True)
class GpuProcess:
    """A compute process holding memory on GPU `gpu`: its pid and the bytes it holds (None when
    the driver does not say, e.g. inside some containers). NVML gives no name: `hardware` reads
    it from /proc."""

    gpu: int
    pid: int
    used_bytes: int | None = None


@dataclass(frozen=True)
class ProcessUtilisation:
    """One NVML sample of how much of GPU `gpu` process `pid` used: streaming-multiprocessor
    and memory-controller busy percentages over the driver's last sampling period, stamped in
    microseconds (the stamp is what the next query passes, to get only newer samples)."""

    gpu: int
    pid: int
    timestamp_us: int
    sm_pct: int
    memory_pct: int


@dataclass(frozen=True)
class NvmlReport:
    gpus: tuple[GpuDevice, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None  # the driver's CUDA, "12.4"
    pairs: tuple[GpuPair, ...] = ()


def _try(fn: Callable[[], T], default: T) -> T:
    """A foreign call whose failure only means one fact less (NVMLError_NotSupported, ...)."""
    try:
        return fn()
    except Exception:
        return default


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda(version: int | None) -> str | None:
    return None if not version else f"{version // 1000}.{version % 1000 // 10}"


def _pynvml() -> Nvml | None:
    try:
        import pynvml
    except Exception:  # not installed, or a broken install: no NVML
        return None
    return pynvml  # a module satisfying the protocol


@contextmanager
def opened(nvml: Nvml | None = None) -> Iterator[Nvml | None]:
    """NVML (`nvml`, else pynvml) initialized for the block and shut down after it; None when it
    cannot start (no package, no driver). Never raises from starting or stopping."""
    nvml = _pynvml() if nvml is None else nvml
    if nvml is not None:
        try:
            nvml.nvmlInit()
        except Exception:
            nvml = None
    try:
        yield nvml
    finally:
        if nvml is not None:
            _try(nvml.nvmlShutdown, None)


def read(nvml: Nvml | None = None) -> NvmlReport | None:
    """Every GPU NVML sees, with the pairs' links; None when NVML cannot start (no package, no
    driver). Never raises: a GPU that fails mid-read ends the list with what was read before."""
    with opened(nvml) as started:
        return None if started is None else _read(started)


def _read(nvml: Nvml) -> NvmlReport:
    handles: list[Any] = []
    gpus: list[GpuDevice] = []
    for i in range(_try(nvml.nvmlDeviceGetCount, 0)):
        try:
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(nvml.nvmlDeviceGetName(h))
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            total, free = int(mem.total), int(mem.free)
        except Exception:
            break  # keep what was read before the failure
        cc = _try(lambda: nvml.nvmlDeviceGetCudaComputeCapability(h), None)
        gpus.append(
            GpuDevice(
                i,
                name,
                total,
                free,
                compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
                pcie_generation=_try(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(h)), None),
                pcie_width=_try(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(h)), None),
                uuid=_try(lambda: _text(nvml.nvmlDeviceGetUUID(h)), None),
            )
        )
        handles.append(h)
    pairs = []
    for a in range(len(handles)):
        for b in range(a + 1, len(handles)):
            ha, hb = handles[a], handles[b]
            nvlink = _try(lambda: nvml.nvmlDeviceGetP2PStatus(ha, hb, P2P_CAPS_INDEX_NVLINK), None)
            level = _try(lambda: nvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb), None)
            pairs.append(
                GpuPair(
                    a,
                    b,
                    Interconnect.NVLINK if nvlink == P2P_STATUS_OK else Interconnect.PCIE,
                    TOPOLOGY_LABELS.get(level) if level is not None else None,
                )
            )
    return NvmlReport(
        tuple(gpus),
        _try(lambda: _text(nvml.nvmlSystemGetDriverVersion()), None),
        _cuda(_try(nvml.nvmlSystemGetCudaDriverVersion, None)),
        tuple(pairs),
    )


def compute_processes(gpus: frozenset[int] | None = None, nvml: Nvml | None = None) -> list[GpuProcess]:
    """The compute processes on GPUs `gpus` (all when None), by GPU index; empty without NVML.
    Never raises: a GPU whose processes cannot be listed contributes none."""
    with opened(nvml) as nv:
        return [] if nv is None else running_processes(nv, gpus)


def _indices(nv: Nvml, gpus: frozenset[int] | None) -> list[int]:
    return [i for i in range(_try(nv.nvmlDeviceGetCount, 0)) if gpus is None or i in gpus]


def running_processes(nv: Nvml, gpus: frozenset[int] | None = None) -> list[GpuProcess]:
    """`compute_processes` on an NVML the caller has opened (a monitor sampling every half
    second keeps it open for its window instead of starting NVML each time)."""
    out: list[GpuProcess] = []
    for i in _indices(nv, gpus):
        procs: list[Any] = _try(lambda: nv.nvmlDeviceGetComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(i)), [])
        for p in procs or []:
            used = p.usedGpuMemory  # pynvml sets None when the driver does not say
            out.append(GpuProcess(i, int(p.pid), None if used is None else int(used)))
    return out


def process_utilisation(
    nv: Nvml, gpus: frozenset[int] | None = None, since_us: int = 0
) -> list[ProcessUtilisation] | None:
    """Per-process utilisation samples newer than `since_us` on an opened NVML; None when the
    driver gives none for some GPU (NotSupported on older boards, some containers), so a
    caller can tell "nobody used the GPU" from "the driver would not say"."""
    out: list[ProcessUtilisation] = []
    for i in _indices(nv, gpus):
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(nv.nvmlDeviceGetHandleByIndex(i), since_us)
        except Exception as e:
            if "NotFound" in type(e).__name__:  # pynvml: no sample since `since_us`
                continue
            return None
        out.extend(
            ProcessUtilisation(i, int(s.pid), int(s.timeStamp), int(s.smUtil), int(s.memUtil))
            for s in samples or []
            if int(s.timeStamp) > since_us
        )
    return out


def device_utilisation(nv: Nvml, gpus: frozenset[int] | None = None) -> dict[int, int]:
    """Each GPU's busy percentage (all processes together) on an opened NVML; a GPU the driver
    will not report is absent."""
    out: dict[int, int] = {}
    for i in _indices(nv, gpus):
        rates = _try(lambda: nv.nvmlDeviceGetUtilizationRates(nv.nvmlDeviceGetHandleByIndex(i)), None)
        if rates is not None:
            out[i] = int(rates.gpu)
    return out


# ---- recordings: every answer `read` uses, as JSON (replayed by kvtune.testing.nvml_recorded) ----


def record(nvml: Nvml | None = None) -> dict[str, Any]:
    """The raw answers of every call `read` makes, as JSON-ready data (None: the call failed)."""
    nvml = _pynvml() if nvml is None else nvml
    if nvml is None:
        return {"init_error": "pynvml is not installed (pip install nvidia-ml-py)"}
    try:
        nvml.nvmlInit()
    except Exception as e:
        return {"init_error": f"{type(e).__name__}: {e}"}
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        devices = []
        for h in handles:
            mem = _try(lambda: nvml.nvmlDeviceGetMemoryInfo(h), None)
            devices.append(
                {
                    "name": _try(lambda: _text(nvml.nvmlDeviceGetName(h)), None),
                    "memory": None if mem is None else {"total": int(mem.total), "free": int(mem.free)},
                    "compute_capability": _try(lambda: list(nvml.nvmlDeviceGetCudaComputeCapability(h)), None),
                    "max_pcie_link": [
                        _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(h), None),
                        _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(h), None),
                    ],
                    "processes": _try(
                        lambda: [
                            {
                                "pid": int(p.pid),
                                "used_gpu_memory": None if p.usedGpuMemory is None else int(p.usedGpuMemory),
                            }
                            for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)
                        ],
                        None,
                    ),
                    **_utilisation(nvml, h),
                    **_uuid(nvml, h),
                }
            )
        pairs = {
            f"{a},{b}": {
                "p2p_nvlink": _try(
                    lambda: nvml.nvmlDeviceGetP2PStatus(handles[a], handles[b], P2P_CAPS_INDEX_NVLINK), None
                ),
                "common_ancestor": _try(lambda: nvml.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b]), None),
            }
            for a in range(len(handles))
            for b in range(a + 1, len(handles))
        }
        return {
            "driver_version": _try(lambda: _text(nvml.nvmlSystemGetDriverVersion()), None),
            "cuda_driver_version": _try(nvml.nvmlSystemGetCudaDriverVersion, None),
            "devices": devices,
            "pairs": pairs,
        }
    finally:
        _try(nvml.nvmlShutdown, None)


def _utilisation(nvml: Nvml, h: Any) -> dict[str, Any]:
    """The utilisation answers, only those the driver gave: recordings made before kvtune asked
    for them stay what `record` writes (a missing key replays as "not supported")."""
    answers = {
        "utilisation": _try(lambda: _rates(nvml.nvmlDeviceGetUtilizationRates(h)), None),
        "process_utilisation": _try(
            lambda: [_util_sample(s) for s in nvml.nvmlDeviceGetProcessUtilization(h, 0)], None
        ),
    }
    return {k: v for k, v in answers.items() if v is not None}


def _uuid(nvml: Nvml, h: Any) -> dict[str, str]:
    """The GPU's UUID when the driver gives it (recordings made before kvtune read it stay as
    they were: a missing key replays as "not supported")."""
    uuid = _try(lambda: _text(nvml.nvmlDeviceGetUUID(h)), None)
    return {} if uuid is None else {"uuid": uuid}


def _rates(r: Any) -> dict[str, int]:
    return {"gpu": int(r.gpu), "memory": int(r.memory)}


def _util_sample(s: Any) -> dict[str, int]:
    return {"pid": int(s.pid), "time_stamp": int(s.timeStamp), "sm_util": int(s.smUtil), "mem_util": int(s.memUtil)}


if __name__ == "__main__":  # record this machine: python -m kvtune.nvml > host.json
    json.dump(record(), sys.stdout, indent=1)
    print()
