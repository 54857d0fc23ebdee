"""The memory wait on recorded NVML answers: a GPU whose previous server's memory comes back
after a delay (the recording changes when the fake clock passes it: no real sleeps), and a GPU
another process keeps, whose holder the wait names (pid, memory, name from a fake /proc)."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path

from kvtune import hardware
from kvtune.nvml_recorded import Recorded
from kvtune.tuner.trial.memory_wait import SETTLE_S, MemorySnapshot, MemoryWait
from tests.paths import NVML_DATA

DATA = NVML_DATA
GiB = 2**30


def recording(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


class FreeingGpus:
    """Recorded NVML answers that change on a fake clock: `timeline` lists (from time, recording);
    the answers are the last recording whose time has come. Only sleeping moves the clock."""

    def __init__(self, *timeline: tuple[float, dict]):
        self.now, self.sleeps = 0.0, []
        self.timeline = list(timeline)

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s

    def nvml(self) -> Recorded:
        return Recorded([rec for t, rec in self.timeline if t <= self.now][-1])

    def read(self, gpus: frozenset[int] | None = None) -> MemorySnapshot:
        """RAM fixed (this host's RAM is not under test), GPUs from the recording now."""
        free = hardware.gpu_free_bytes(self.nvml())
        return MemorySnapshot(16 * GiB, {i: b for i, b in free.items() if gpus is None or i in gpus})

    def holders(self, gpus) -> list[hardware.GpuHolder]:
        return hardware.gpu_holders(gpus, self.nvml(), proc=Path("/nonexistent-proc"))


def with_server(rec: dict, gpus: list[int], used: int, pid: int = 777) -> dict:
    """The recording with a server process holding `used` bytes on each of `gpus`."""
    rec = copy.deepcopy(rec)
    for i in gpus:
        dev = rec["devices"][i]
        dev["memory"]["free"] -= used
        dev["processes"] = [*dev["processes"], {"pid": pid, "used_gpu_memory": used}]
    return rec


def test_waits_until_the_stopped_servers_gpu_memory_is_back():
    idle = recording("h100_sxm_x8_nvlink")
    fake = FreeingGpus((0.0, idle))
    w = MemoryWait(read=partial(fake.read, frozenset({2, 3})), holders=fake.holders, clock=fake.clock, sleep=fake.sleep)
    w.before_launch()  # the previous server starts on idle GPUs 2 and 3
    # It was stopped; its EngineCore still holds 60 GiB on each until 3 s from now.
    fake.timeline = [(0.0, with_server(idle, [2, 3], 60 * GiB)), (3.0, idle)]
    result = w.before_launch()
    assert not result.held and result.holders == ()
    assert 3.0 <= result.waited_s < 3.5 and sum(fake.sleeps) == result.waited_s


def test_names_another_process_that_keeps_the_trials_gpu():
    busy = recording("a100_70pct_used")
    idle = copy.deepcopy(busy)
    idle["devices"][0]["memory"]["free"] = idle["devices"][0]["memory"]["total"]
    idle["devices"][0]["processes"] = []
    fake = FreeingGpus((0.0, idle))
    w = MemoryWait(read=partial(fake.read, frozenset({0})), holders=fake.holders, clock=fake.clock, sleep=fake.sleep)
    w.before_launch()
    fake.timeline = [(0.0, busy)]  # another process now holds 56 GiB of GPU 0 and keeps it
    result = w.before_launch()
    assert result.settled and set(result.held) == {"GPU 0"}
    assert [(h.gpu, h.pid, h.used_bytes) for h in result.holders] == [(0, 4242, 56 * GiB)]
    assert SETTLE_S <= result.waited_s < SETTLE_S + 1
    assert "held by pid 4242 (name unknown, 56.0 GiB) on GPU 0" in result.describe()


def test_holders_are_only_looked_up_for_gpus_still_short():
    idle = recording("rtx4090_x2_pcie")
    asked = []
    w = MemoryWait(
        read=lambda: MemorySnapshot(16 * GiB, {0: 20 * GiB, 1: 20 * GiB}),
        holders=lambda gpus: asked.append(list(gpus)) or [],
        clock=lambda: 0.0,
        sleep=lambda s: None,
    )
    w.before_launch()
    assert not w.before_launch().held and asked == []
    assert idle["devices"][0]["processes"] == []


def test_gpu_holders_reads_names_from_proc(tmp_path):
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "comm").write_text("VLLM::EngineCor\n")
    holders = hardware.gpu_holders([0], Recorded(recording("a100_70pct_used")), proc=tmp_path)
    assert [h.describe() for h in holders] == ["pid 4242 (VLLM::EngineCor, 56.0 GiB) on GPU 0"]
    assert hardware.gpu_holders([1], Recorded(recording("a100_70pct_used")), proc=tmp_path) == []
    assert hardware.gpu_holders(None, Recorded(recording("no_nvml"))) == []
