"""A measurement taken while the machine was busy is dropped and re-measured inside the runner
(fake launcher: a real fake server; a fake interference monitor: no /proc, no timing).

Here because the runner starts the fake launcher's server, a child process listening on a real
port, which tests/unit may not; the records' reading is in tests/unit/tuner/trial/test_disturbed.py."""

from __future__ import annotations

import json
from pathlib import Path

from kvtune.interference import Interference
from kvtune.knobs import Candidate
from kvtune.objectives.targets import with_default_error_target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.trial import disturbance
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.memory_wait import MemorySnapshot, MemoryWait
from kvtune.tuner.trial.runner import TrialRunner
from kvtune.workload import Workload

WL = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=1, request_timeout_s=10)


def window(disturbed: bool, foreign: float) -> Interference:
    return Interference(
        seconds=2.0,
        cpus=2,
        foreign_cores=foreign,
        foreign_cores_peak=foreign,
        server_cores=1.0,
        own_cores=0.2,
        steal_share=0.0,
        cpu_pressure=None,
        memory_pressure=None,
        disturbed=disturbed,
        crossed=(f"foreign CPU {foreign:.2f} cores",) if disturbed else (),
        reason=f"disturbed: foreign CPU {foreign:.2f} cores" if disturbed else "quiet",
    )


class FakeMonitor:
    """Answers each window from a script: True = disturbed (1.5 foreign cores), False = quiet.
    Records what the runner built it with and every window it was asked for."""

    def __init__(self, script: list[bool]):
        self.script = list(script)
        self.started = 0
        self.built_with: list[tuple] = []

    def factory(self, server_pids, gpus):
        self.built_with.append((tuple(server_pids()), gpus))
        return self

    def start(self) -> None:
        self.started += 1

    def stop(self) -> Interference:
        busy = self.script.pop(0) if self.script else False
        return window(busy, 1.5 if busy else 0.01)


def runner_for(tmp_path: Path, monitor: FakeMonitor, phases: list, repeats: int = 1) -> TrialRunner:
    spec = StudySpec(study="d", workload=WL, targets=["ttft_p95<5s"], startup_timeout_s=20, repeats=repeats).validate()
    targets = with_default_error_target(list(spec.targets))
    slept: list[float] = []
    runner = TrialRunner(
        Subject(spec, FakeLauncher(), targets),
        Placement.here(),
        tmp_path / "pid.json",
        on_phase=lambda n, p: phases.append(p),
        monitor=monitor.factory,
        sleep=slept.append,
    )
    runner.memory_wait = MemoryWait(read=lambda: MemorySnapshot(64 * 2**30), sleep=lambda s: None)
    runner.slept = slept  # type: ignore[attr-defined]
    return runner


def run_one(runner: TrialRunner, tmp_path: Path) -> TrialOutcome:
    outcome, port = runner.new_outcome(3, Candidate(flags={"speed": 2}), baseline=False)
    return runner.run(outcome, port, tmp_path / "trial", baseline=None)


def test_a_quiet_measurement_is_kept_and_its_window_recorded(tmp_path):
    monitor, phases = FakeMonitor([False]), []
    outcome = run_one(runner_for(tmp_path, monitor, phases), tmp_path)
    assert outcome.feasible and not outcome.disturbed and outcome.disturbed_attempts == []
    assert outcome.interference["foreign_cores"] == 0.01 and monitor.started == 1
    server_pids, gpus = monitor.built_with[0]
    assert len(server_pids) == 1 and server_pids[0] > 0 and gpus is None  # the server's pid, no GPU pinned
    bench = json.loads((tmp_path / "trial" / "bench.json").read_text())
    assert bench["interference"]["disturbed"] is False and bench["runs"][0]["interference"]["reason"] == "quiet"
    assert not any("disturbed" in p for p in phases)
    spent = outcome.time_spent or {}
    assert spent["measurement_s"] > 0 and spent["waits_s"] < spent["measurement_s"]  # nothing dropped


def test_a_disturbed_measurement_is_dropped_and_measured_again_once_quiet(tmp_path):
    # measurement 1 disturbed; then one look at the machine (quiet); measurement 2 quiet
    monitor, phases = FakeMonitor([True, False, False]), []
    runner = runner_for(tmp_path, monitor, phases)
    outcome = run_one(runner, tmp_path)
    assert outcome.feasible and not outcome.disturbed
    assert [a["foreign_cores"] for a in outcome.disturbed_attempts] == [1.5]
    assert outcome.interference["foreign_cores"] == 0.01
    assert runner.slept == [disturbance.QUIET_WINDOW_S]
    assert any(
        p.startswith("measurement 1 disturbed: foreign CPU 1.50 cores: dropped") and "attempt 2 of 3" in p
        for p in phases
    )
    assert phases.count("measuring") == 2  # the bench's own phases still reach the caller
    spent = outcome.time_spent or {}  # the dropped measurement held the server for nothing: a wait
    assert spent["waits_s"] > 0 and spent["measurement_s"] > 0 and spent["startup_s"] > 0
    d = TrialOutcome.from_dict(json.loads(json.dumps(outcome.to_dict())))
    assert (
        d.disturbed_attempts == json.loads(json.dumps(outcome.disturbed_attempts)) and d.to_dict()["disturbed"] is False
    )


def test_a_measurement_that_stays_disturbed_says_so_after_the_bounded_retries(tmp_path):
    # every window disturbed: 3 measurements, and QUIET_LOOKS looks before each re-measurement
    monitor, phases = FakeMonitor([True] * 50), []
    runner = runner_for(tmp_path, monitor, phases)
    outcome = run_one(runner, tmp_path)
    assert outcome.disturbed and outcome.metrics and len(outcome.disturbed_attempts) == 2
    assert monitor.started == 3 + 2 * disturbance.QUIET_LOOKS
    assert len(runner.slept) == 2 * disturbance.QUIET_LOOKS
    assert any(p.startswith("measurement 3 of 3 disturbed") and "no evidence" in p for p in phases)
    assert any("re-measuring anyway" in p for p in phases)
    assert outcome.to_dict()["disturbed"] is True


def test_the_worst_run_of_repeats_judges_the_measurement(tmp_path):
    # repeats 2: the second run is disturbed, so the measurement is; the re-measurement is quiet
    monitor, phases = FakeMonitor([False, True, False, False, False]), []
    outcome = run_one(runner_for(tmp_path, monitor, phases, repeats=2), tmp_path)
    assert len(outcome.disturbed_attempts) == 1 and not outcome.disturbed
    assert outcome.metrics["repeats"] == 2.0
