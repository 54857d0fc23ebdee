"""The trial runner on its own, without a study: launch -> measure -> score -> a TrialOutcome
(fake launcher: a real fake server process and the real load client)."""

from __future__ import annotations

import json
from pathlib import Path

from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate, Knob
from kvtune.objectives.targets import with_default_error_target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.memory_wait import MemorySnapshot, MemoryWait
from kvtune.tuner.trial.runner import TrialRunner
from kvtune.workload import Workload

WL = Workload(
    concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=16, warmup_requests=1, request_timeout_s=10
)


def runner_for(spec: StudySpec, launcher: FakeLauncher, tmp_path: Path, phases: list) -> TrialRunner:
    targets = with_default_error_target(list(spec.targets))  # the spec holds parsed targets
    runner = TrialRunner(
        Subject(spec, launcher, targets),
        Placement.here(slot=3),
        tmp_path / "server.pid.json",
        on_phase=lambda n, p: phases.append((n, p)),
    )
    runner.memory_wait = MemoryWait(read=lambda: MemorySnapshot(64 * 2**30), sleep=lambda s: None)
    return runner


def test_a_trial_is_launched_measured_and_scored(tmp_path):
    spec = StudySpec(study="r", workload=WL, targets=["ttft_p95<5s"], startup_timeout_s=20).validate()
    phases: list = []
    runner = runner_for(spec, FakeLauncher(), tmp_path, phases)
    outcome, port = runner.new_outcome(7, Candidate(flags={"speed": 2}), baseline=False)
    assert f"{port}" in outcome.argv and outcome.number == 7
    runner.run(outcome, port, tmp_path / "trial", baseline=None)
    assert outcome.launched and outcome.feasible and outcome.failure is None
    assert outcome.metrics["num_requests"] == 16 and outcome.objective == outcome.metrics["output_throughput"]
    assert set(outcome.constraints) == {t.constraint_key for t in runner.targets} | {"server_ran"}
    assert json.loads((tmp_path / "trial" / "bench.json").read_text())["runs"]
    assert (7, "starting server") in phases


def test_the_early_stop_reason_travels_in_the_outcome(tmp_path):
    spec = StudySpec(study="r", workload=WL, targets=["ttft_p95<100ms"], startup_timeout_s=20).validate()
    phases: list = []
    slow = FakeLauncher(base_ttft_ms=300, knobs=(Knob("speed", "choices", choices=(1,)),))
    runner = runner_for(spec, slow, tmp_path, phases)
    outcome, port = runner.new_outcome(1, Candidate(flags={"speed": 1}), baseline=False)
    runner.run(outcome, port, tmp_path / "trial", baseline=None)
    assert outcome.reason.startswith("stopped after 2 of 16 requests")
    assert outcome.failure is FailureKind.TARGET_MISSED and outcome.metrics["early_stopped"] == 1.0
    assert (1, outcome.reason) in phases
    # the same config as the baseline is measured in full: its figures anchor the others
    base, port = runner.new_outcome(0, Candidate(), baseline=True)
    runner.run(base, port, tmp_path / "base", baseline=None)
    assert base.metrics["num_requests"] == 16 and "early_stopped" not in base.metrics
    assert base.reason.startswith("ttft_p95 ")


def test_a_refused_flag_is_an_infeasible_outcome_that_says_why(tmp_path):
    spec = StudySpec(study="r", workload=WL, startup_timeout_s=20).validate()
    runner = runner_for(spec, FakeLauncher(), tmp_path, [])
    outcome, port = runner.new_outcome(2, Candidate(flags={"bogus": True}), baseline=False)
    runner.run(outcome, port, tmp_path / "trial", baseline=None)
    assert outcome.failure is FailureKind.START_FAILED and outcome.launched and not outcome.transient
    assert not outcome.feasible and outcome.metrics is None
    assert "unrecognized arguments: --bogus-flag" in outcome.reason


def test_the_cpu_set_a_server_is_pinned_to_travels_in_the_outcome(tmp_path):
    # container exports reserve that many CPUs (artifacts/cpu_resources.py); none: every CPU kvtune had
    spec = StudySpec(study="r", workload=WL, targets=["ttft_p95<5s"]).validate()
    pinned = TrialRunner(
        Subject(spec, FakeLauncher(), list(spec.targets)), Placement.here(slot=1, cpus={5, 4}), tmp_path / "p.json"
    )
    outcome, _ = pinned.new_outcome(1, Candidate(), baseline=False)
    assert outcome.cpus == [4, 5] and TrialOutcome.from_dict(outcome.to_dict()).cpus == [4, 5]
    free, _ = runner_for(spec, FakeLauncher(), tmp_path, []).new_outcome(2, Candidate(), baseline=False)
    assert free.cpus is None and TrialOutcome.from_dict(free.to_dict()).cpus is None
