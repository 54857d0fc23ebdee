"""Starting a trial's server (tuner/trial/launch_retry.py): a transient failure (a port clash, a
start-up timeout, an exit while the previous server's memory is still held) is retried once on a
fresh port, a verdict is final, and the outcome records the start that worked. Scripted servers,
a scripted memory reader and a recording clock: no process, no real waiting. (Moved from
tests/unit/tuner/test_transient.py; the loop's side, on real processes, is in
tests/integration/tuner/test_transient.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.launchers.process import ServerStartError
from kvtune.launchers.startup import StartupLimits
from kvtune.study.outcome import TrialOutcome
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.testing.virtual_time import VirtualClock
from kvtune.tuner.trial.launch_retry import LaunchFailed, MemoryWaitResult, Starter, is_transient
from kvtune.tuner.trial.memory_wait import MemorySnapshot, MemoryWait

GiB = 2**30


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


def never_back() -> MemoryWait:
    """A memory wait whose previous server started with 64 GiB free and only 8 GiB came back,
    on a virtual clock (its bounded wait passes in no wall time)."""
    snapshots = [MemorySnapshot(64 * GiB), MemorySnapshot(8 * GiB)]
    clock = VirtualClock()
    memory = MemoryWait(
        read=lambda: snapshots.pop(0) if len(snapshots) > 1 else snapshots[0],
        holders=lambda gpus: [],
        clock=clock.monotonic,
        sleep=clock.sleep,
    )
    memory.before_launch()  # the previous server's launch: the reference
    return memory


def test_an_exit_while_the_previous_servers_memory_is_held_is_transient(tmp_path):
    oom = ServerStartError(FailureKind.START_FAILED, "exited with status 1: out of memory", returncode=1)
    s, outcome, made, phases = starter(tmp_path, [oom, None], memory=never_back(), log_text="error: out of memory\n")
    s.start(outcome, 8000, tmp_path)
    assert len(made) == 2 and "memory still held" in phases[0]


def test_an_exit_on_the_retry_is_a_verdict_once_the_held_memory_is_the_new_reference(tmp_path):
    """Memory that never comes back costs one wait: the retry's reference is what was free then,
    so its exit is the config's (not transient), and the reason keeps the first start's."""
    oom = ServerStartError(FailureKind.START_FAILED, "exited with status 1: out of memory", returncode=1)
    s, outcome, made, _ = starter(tmp_path, [oom, oom], memory=never_back(), log_text="error: out of memory\n")
    with pytest.raises(LaunchFailed) as e:
        s.start(outcome, 8000, tmp_path)
    assert len(made) == 2 and not e.value.transient and e.value.kind is FailureKind.START_FAILED
    assert "; failed on a retry too (first start: " in e.value.reason
    assert "(memory still held after" in e.value.reason.split("first start: ", 1)[1]


def test_is_transient():
    clash = ServerStartError(FailureKind.PORT_BUSY, "port in use", transient=True)
    exit_ = ServerStartError(FailureKind.START_FAILED, "exited", returncode=1)
    timeout = ServerStartError(FailureKind.START_TIMEOUT, "not healthy", transient=False)
    held = MemoryWaitResult(waited_s=30.0, held={"RAM": 4 * GiB})
    assert is_transient(clash, MemoryWaitResult()) and is_transient(exit_, held)
    assert not is_transient(exit_, MemoryWaitResult())
    assert not is_transient(timeout, held)  # only an exit is blamed on held memory


def test_an_interrupted_start_stops_the_server_and_propagates(tmp_path):
    s, outcome, made, _ = starter(tmp_path, [None])
    made_before = len(made)

    def interrupted(limits: StartupLimits) -> float:
        raise KeyboardInterrupt

    original = s.new_server

    def new_server(o, port, log):
        server = original(o, port, log)
        server.wait_ready = interrupted  # type: ignore[method-assign]
        return server

    s.new_server = new_server
    with pytest.raises(KeyboardInterrupt):
        s.start(outcome, 8000, tmp_path)
    assert len(made) == made_before + 1 and made[-1].stopped and not outcome.transient


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
