"""Transient launch failures vs verdicts: a port clash or a start-up timeout is retried once on a
fresh port, a failure that happens again is recorded as transient and never copied to a
duplicate, and the launch waits (bounded) for the previous server's memory.

The Starter and the memory wait run on injected fakes (servers, memory reader, clock, sleep: no
real waiting); the loop tests run the fake server as real processes.

The tests here start no process; those that do are in tests/integration/tuner/test_transient.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.kinds import FailureKind
from kvtune.launchers.base import Candidate
from kvtune.launchers.process import ServerStartError
from kvtune.launchers.startup import StartupLimits
from kvtune.study.outcome import TrialOutcome
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.trial.launch_retry import LaunchFailed, Starter
from kvtune.tuner.trial.memory_wait import MEMORY_WAIT_S, POLL_S, SETTLE_S, MemorySnapshot, MemoryWait, visible_gpus

GiB = 2**30


# ---- the memory wait ----------------------------------------------------------------------------


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


# ---- the Starter on fake servers ------------------------------------------------------------------


class ScriptedServer:
    """A server whose start fails with the scripted error (None: ready)."""

    def __init__(self, port: int, log: Path, error: ServerStartError | None, log_text: str = ""):
        self.port, self.log, self.error, self.text = port, log, error, log_text
        self.started = self.stopped = False

    def start(self) -> "ScriptedServer":
        self.started = True
        return self

    def wait_ready(self, limits: StartupLimits) -> float:
        self.limits = limits
        if self.error is not None:
            raise self.error
        return 0.5

    def stop(self) -> None:
        self.stopped = True

    def log_text(self) -> str:
        return self.text


LIMITS = StartupLimits(stall_s=3.0, cap_s=5.0)


def starter(tmp_path, errors, memory: MemoryWait | None = None, log_text: str = "", launcher=None):
    made: list[ScriptedServer] = []
    phases: list[str] = []
    ports = iter(range(9001, 9100))

    def new_server(o: TrialOutcome, port: int, log: Path) -> ScriptedServer:
        made.append(ScriptedServer(port, log, errors[len(made)], log_text))
        return made[-1]

    s = Starter(
        launcher or FakeLauncher(),
        "127.0.0.1",
        LIMITS,
        memory or MemoryWait(read=lambda: MemorySnapshot(8 * GiB), sleep=_no_sleep),
        new_server,
        on_phase=phases.append,
        fresh_port=lambda host: next(ports),
    )
    outcome = TrialOutcome(
        number=3, candidate=Candidate({"speed": 2}), argv=FakeLauncher().command(Candidate({"speed": 2}), 8000), env={}
    )
    return s, outcome, made, phases


def _no_sleep(s: float) -> None:
    raise AssertionError("the memory wait slept although memory was back")


def test_a_port_clash_is_retried_on_a_fresh_port(tmp_path):
    clash = ServerStartError(FailureKind.PORT_BUSY, "port 8000 is already in use", transient=True)
    s, outcome, made, phases = starter(tmp_path, [clash, None])
    server = s.start(outcome, 8000, tmp_path)
    assert server is made[1] and [m.port for m in made] == [8000, 9001]
    assert made[0].stopped and not made[1].stopped  # the caller stops the ready one
    assert "9001" in outcome.argv and "8000" not in outcome.argv  # the argv that ran
    assert outcome.log_path == str(tmp_path / "server.retry1.log") and outcome.launched
    assert not outcome.transient
    assert any("transient: retrying once on a fresh port" in p for p in phases)


def test_a_start_up_timeout_is_retried_once_then_recorded(tmp_path):
    timeout = ServerStartError(FailureKind.START_TIMEOUT, "not healthy after 5 s: loading", transient=True)
    s, outcome, made, _ = starter(tmp_path, [timeout, timeout, None])
    with pytest.raises(LaunchFailed) as e:
        s.start(outcome, 8000, tmp_path)
    assert len(made) == 2 and all(m.stopped for m in made)  # retried once, not more
    assert e.value.kind is FailureKind.START_TIMEOUT and e.value.transient
    assert e.value.reason.startswith("server start timed out: not healthy after 5 s")
    assert "transient, failed on a retry too" in e.value.reason


def test_a_verdict_is_not_retried(tmp_path):
    refused = ServerStartError(FailureKind.START_FAILED, "exited with status 2: usage", returncode=2)
    s, outcome, made, _ = starter(tmp_path, [refused, None], log_text="error: invalid argument: --x\n")
    with pytest.raises(LaunchFailed) as e:
        s.start(outcome, 8000, tmp_path)
    assert len(made) == 1 and not e.value.transient
    assert e.value.reason == "server failed to start: exited with status 2: error: invalid argument: --x"


def test_an_exit_while_the_previous_servers_memory_is_held_is_transient(tmp_path):
    t = FakeTime()
    memory = waiter(reader(MemorySnapshot(64 * GiB), MemorySnapshot(8 * GiB)), t)  # never back
    memory.before_launch()  # the previous server started with 64 GiB free
    oom = ServerStartError(FailureKind.START_FAILED, "exited with status 1: out of memory", returncode=1)
    s, outcome, made, phases = starter(tmp_path, [oom, None], memory=memory, log_text="error: out of memory\n")
    s.start(outcome, 8000, tmp_path)
    assert len(made) == 2 and "memory still held" in phases[0]


class LoggingLauncher(FakeLauncher):
    """A fake backend whose log names one start-up phase."""

    def startup_split(self, log_text: str) -> dict[str, float]:
        return {"load": float(log_text.split("load ")[1].split()[0])} if "load " in log_text else {}


def test_the_start_that_worked_records_its_seconds_split_and_ran_under_the_study_limits(tmp_path):
    clash = ServerStartError(FailureKind.PORT_BUSY, "port 8000 is already in use", transient=True)
    s, outcome, made, _ = starter(tmp_path, [clash, None], log_text="load 0.25 s\n", launcher=LoggingLauncher())
    s.start(outcome, 8000, tmp_path)
    assert made[1].limits is LIMITS  # the stall window and the cap reach the server's wait
    assert outcome.startup_s == 0.5 and outcome.startup_split == {"total": 0.5, "load": 0.25}
    assert TrialOutcome.from_dict(outcome.to_dict()).startup_split == outcome.startup_split  # results.json


def test_a_start_that_failed_has_no_split(tmp_path):
    refused = ServerStartError(FailureKind.START_FAILED, "exited with status 2: usage", returncode=2)
    s, outcome, _, _ = starter(tmp_path, [refused], log_text="load 0.25 s\n", launcher=LoggingLauncher())
    with pytest.raises(LaunchFailed):
        s.start(outcome, 8000, tmp_path)
    assert outcome.startup_split == {} and outcome.startup_s is None
