"""The memory wait on recorded NVML answers: a GPU whose previous server's memory comes back
after a delay (the recording changes when the fake clock passes it: no real sleeps), and a GPU
another process keeps, whose holder the wait names (pid, memory, name from a fake /proc); and the
wait itself on a scripted memory reader and a clock that moves only when it sleeps."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path

import pytest

from kvtune import hardware
from kvtune.testing.nvml_recorded import Recorded
from kvtune.tuner.trial.memory_wait import MEMORY_WAIT_S, POLL_S, SETTLE_S, MemorySnapshot, MemoryWait, visible_gpus
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


# ---- the wait on a scripted memory reader (moved from tests/unit/tuner/test_transient.py) ----


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def reader(*snapshots: MemorySnapshot):
    """Answers the snapshots in turn, then the last one forever; counts the reads."""
    seq = list(snapshots)
    calls = []

    def read() -> MemorySnapshot:
        calls.append(1)
        return seq.pop(0) if len(seq) > 1 else seq[0]

    read.calls = calls  # type: ignore[attr-defined]
    return read


def waiter(read, t: FakeTime) -> MemoryWait:
    return MemoryWait(read=read, clock=t.clock, sleep=t.sleep)


def test_memory_wait_returns_at_once_when_memory_is_back():
    t = FakeTime()
    read = reader(MemorySnapshot(16 * GiB, {0: 70 * GiB}))
    w = waiter(read, t)
    first = w.before_launch()  # nothing to compare with yet
    again = w.before_launch()  # the previous server's memory is all back
    assert not first.held and not again.held
    assert t.sleeps == [] and len(read.calls) == 2  # one reading per launch, no sleep


def test_memory_wait_waits_until_the_previous_servers_memory_is_back():
    t = FakeTime()
    read = reader(
        MemorySnapshot(16 * GiB, {0: 70 * GiB}),  # before the previous server
        MemorySnapshot(16 * GiB, {0: 10 * GiB}),  # the GPU driver still holds it
        MemorySnapshot(16 * GiB, {0: 40 * GiB}),
        MemorySnapshot(16 * GiB, {0: 70 * GiB}),
    )
    w = waiter(read, t)
    w.before_launch()
    result = w.before_launch()
    assert not result.held
    assert t.sleeps == [POLL_S, POLL_S] and result.waited_s == pytest.approx(2 * POLL_S)


def test_memory_wait_gives_up_after_the_bound_and_names_what_is_held():
    t = FakeTime()
    # Memory keeps coming back, 100 MiB a poll, far too slowly: only the bound stops the wait.
    snaps = [MemorySnapshot(64 * GiB)] + [MemorySnapshot(4 * GiB + k * 100 * 2**20) for k in range(1000)]
    w = waiter(reader(*snaps), t)
    w.before_launch()
    result = w.before_launch()
    assert set(result.held) == {"RAM"} and not result.settled
    assert MEMORY_WAIT_S <= result.waited_s < MEMORY_WAIT_S + 2 * POLL_S
    assert len(t.sleeps) == int(MEMORY_WAIT_S / POLL_S)
    assert "memory still held after 30.0 s" in result.describe() and "RAM" in result.describe()
    # what is free now is the next launch's reference: memory that never comes back costs one wait
    assert w.before == snaps[1 + len(t.sleeps)]


def test_memory_wait_stops_early_when_nothing_more_comes_back():
    t = FakeTime()
    read = reader(
        MemorySnapshot(16 * GiB, {0: 70 * GiB, 1: 70 * GiB}), MemorySnapshot(16 * GiB, {0: 70 * GiB, 1: 30 * GiB})
    )  # another process took GPU 1
    w = waiter(read, t)
    w.before_launch()
    result = w.before_launch()
    assert result.settled and set(result.held) == {"GPU 1"}
    assert result.held["GPU 1"] == 40 * GiB
    assert SETTLE_S <= result.waited_s < SETTLE_S + 2 * POLL_S


def test_small_changes_are_within_tolerance():
    t = FakeTime()
    read = reader(
        MemorySnapshot(16 * GiB, {0: 70 * GiB}), MemorySnapshot(16 * GiB - 300 * 2**20, {0: 70 * GiB - 2**27})
    )
    w = waiter(read, t)
    w.before_launch()
    assert not w.before_launch().held and t.sleeps == []


def test_visible_gpus():
    assert visible_gpus({}) is None
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == {2, 3}
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-1a2b"}) is None
