"""Recorded NVML answers replayed as an `Nvml`: how tests (and `kvtune plan` for hardware one does
not have) read a real machine's GPUs without that machine.

`kvtune.nvml.record()` (``python -m kvtune.nvml > host.json``) writes what a real driver answered;
`Recorded` answers the same calls from that JSON, raising as pynvml's NVMLError would where the
recorded call failed. Kept apart from the reader so the real boundary stays small and a fake is
never imported by the code that talks to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from kvtune.nvml import P2P_CAPS_INDEX_NVLINK

T = TypeVar("T")


class NvmlUnavailable(Exception):
    """A recorded call that failed on the recorded machine (as pynvml's NVMLError)."""


@dataclass(frozen=True)
class _Memory:
    total: int
    free: int


@dataclass(frozen=True)
class _Process:
    pid: int
    usedGpuMemory: int | None


@dataclass(frozen=True)
class _Rates:
    gpu: int
    memory: int


@dataclass(frozen=True)
class _UtilSample:
    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int


class Recorded:
    """An `Nvml` that answers from a `record()`ing; a None answer raises as NVML would."""

    def __init__(self, recording: dict[str, Any]):
        self.recording = recording
        self.devices: list[dict[str, Any]] = recording.get("devices") or []

    @staticmethod
    def _answer(value: T | None, call: str) -> T:
        if value is None:
            raise NvmlUnavailable(f"{call}: not supported (recorded)")
        return value

    def nvmlInit(self) -> None:
        if self.recording.get("init_error"):
            raise NvmlUnavailable(self.recording["init_error"])

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._answer(self.recording.get("driver_version"), "driver version")

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self._answer(self.recording.get("cuda_driver_version"), "CUDA version")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._answer(self.devices[handle].get("name"), "name")

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._answer(self.devices[handle].get("uuid"), "UUID")

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:
        return _Memory(**self._answer(self.devices[handle].get("memory"), "memory"))

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        major, minor = self._answer(self.devices[handle].get("compute_capability"), "compute capability")
        return major, minor

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return self._answer((self.devices[handle].get("max_pcie_link") or [None])[0], "PCIe generation")

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return self._answer((self.devices[handle].get("max_pcie_link") or [None, None])[1], "PCIe width")

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[_Process]:
        procs = self._answer(self.devices[handle].get("processes"), "compute processes")
        return [_Process(p["pid"], p.get("used_gpu_memory")) for p in procs]

    def _next(self, handle: int, key: str, call: str) -> int:
        """A number, or the next of a list of successive answers (a counter, power samples)."""
        value = self.devices[handle].get(key)
        if isinstance(value, list):
            value = value.pop(0) if len(value) > 1 else (value[0] if value else None)
        return self._answer(value, call)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return self._next(handle, "energy_mj", "energy counter")

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self._next(handle, "power_mw", "power")

    def _successive(self, handle: int, key: str, call: str) -> Any:
        """One recorded answer, or the next of a list of them (``{"successive": [...]}``), so a
        recording can replay what a GPU said at each sample of a window."""
        value = self.devices[handle].get(key)
        if isinstance(value, dict) and "successive" in value:
            answers = value["successive"]
            value = answers.pop(0) if len(answers) > 1 else (answers[0] if answers else None)
        return self._answer(value, call)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Rates:
        return _Rates(**self._successive(handle, "utilisation", "utilisation"))

    def nvmlDeviceGetProcessUtilization(self, handle: int, last_seen: int) -> list[_UtilSample]:
        samples = self._successive(handle, "process_utilisation", "process utilisation")
        return [
            _UtilSample(s["pid"], s["time_stamp"], s["sm_util"], s["mem_util"])
            for s in samples
            if s["time_stamp"] > last_seen
        ]

    def _pair(self, a: int, b: int) -> dict[str, Any]:
        return (self.recording.get("pairs") or {}).get(f"{min(a, b)},{max(a, b)}") or {}

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        if index != P2P_CAPS_INDEX_NVLINK:
            raise NvmlUnavailable(f"P2P index {index} was not recorded")
        return self._answer(self._pair(a, b).get("p2p_nvlink"), "P2P status")

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return self._answer(self._pair(a, b).get("common_ancestor"), "topology")
