"""The trial runner's own pieces that need no server (tuner/trial/runner.py): the outcome it fills
for a candidate, and scoring through the study's targets and objectives with the baseline passed
in. Launching and measuring start a server process: tests/integration/tuner/trial/test_runner.py
(and tests/integration/tuner/trial/test_disturbed.py for the re-measurement). The servers here
are never started, so their port is a fixed number that nothing binds (no socket is opened)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.objectives.targets import MAX_MARGIN, with_default_error_target
from kvtune.study.outcome import RUNS_KEY
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.runner import TrialRunner, request_extra_body
from kvtune.workload import Workload

WL = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=1)
PORT = 18431  # what the placement gives every server here: never bound, the servers never start


def runner_for(tmp_path: Path, targets: list[str], **placement) -> TrialRunner:
    spec = StudySpec(study="r", workload=WL, targets=targets).validate()
    subject = Subject(spec, FakeLauncher(extra_env={"FAKE": "1"}), with_default_error_target(list(spec.targets)))
    return TrialRunner(subject, Placement(**placement, ports=lambda host: PORT), tmp_path / "pid.json")


def test_a_new_outcome_carries_the_candidates_argv_for_its_port_and_the_slots_pinning(tmp_path):
    device_env = {"CUDA_VISIBLE_DEVICES": "1"}
    runner = runner_for(tmp_path, ["ttft<1s"], device_env=device_env)
    candidate = Candidate(flags={"speed": 2}, env={"X": "y"})
    outcome, port = runner.new_outcome(7, candidate, baseline=False, warm_start="old#3")
    assert port == PORT  # the placement's pick
    assert outcome.argv == runner.launcher.command(candidate, port, "127.0.0.1")
    assert outcome.env == {"FAKE": "1", "X": "y"}
    assert outcome.device_env == device_env and outcome.device_env is not device_env
    assert (outcome.number, outcome.baseline, outcome.warm_start, outcome.launched) == (7, False, "old#3", False)
    assert outcome.metrics is None and outcome.failure is None


def test_judge_sets_relative_targets_from_the_baseline_passed_in(tmp_path):
    runner = runner_for(tmp_path, ["ttft_p95<1.5x"])
    base, _ = runner.new_outcome(0, Candidate(), baseline=True)
    base.metrics = {"p95_ttft_ms": 200.0, "error_rate": 0.0, "output_throughput": 10.0}
    runner.judge(base, None)  # measured first: judged against its own figures
    assert base.feasible and base.objective == 10.0
    trial, _ = runner.new_outcome(1, Candidate(flags={"speed": 2}), baseline=False)
    trial.metrics = {"p95_ttft_ms": 350.0, "error_rate": 0.0, "output_throughput": 20.0}
    runner.judge(trial, base)
    assert trial.failure is FailureKind.TARGET_MISSED
    assert trial.constraints["ttft_p95<1.5x"] == pytest.approx(350.0 / 300.0 - 1.0)
    assert trial.reason == "ttft_p95 350 ms breaks ttft_p95<1.5x"


def test_a_relative_target_without_a_baseline_is_infeasible_but_keeps_the_figures(tmp_path):
    runner = runner_for(tmp_path, ["ttft_p95<1.5x"])
    trial, _ = runner.new_outcome(1, Candidate(), baseline=False)
    trial.metrics = {"p95_ttft_ms": 100.0, "error_rate": 0.0}
    runner.judge(trial, None)
    assert not trial.feasible and trial.metrics == {"p95_ttft_ms": 100.0, "error_rate": 0.0}


def test_infeasible_violates_the_studys_every_target(tmp_path):
    runner = runner_for(tmp_path, ["ttft<1s"])
    trial, _ = runner.new_outcome(2, Candidate(), baseline=False)
    runner.infeasible(trial, FailureKind.PRE_SCREEN, "slot too small")
    assert trial.constraints == {"ttft_p95<1000ms": MAX_MARGIN, "error_rate<1%": MAX_MARGIN, RUNS_KEY: 1.0}
    assert trial.failure is FailureKind.PRE_SCREEN and trial.reason == "slot too small"


def test_the_runner_reads_the_subjects_launcher_and_targets(tmp_path):
    runner = runner_for(tmp_path, ["ttft<1s"])
    assert runner.launcher is runner.what.launcher and runner.targets is runner.what.targets
    assert [t.constraint_key for t in runner.targets] == ["ttft_p95<1000ms", "error_rate<1%"]


def test_the_prompt_cache_is_on_only_for_workloads_that_share_prefixes():
    llama = LlamaServerLauncher(binary="/usr/bin/llama-server", model_path="/m/model.gguf")
    assert request_extra_body(llama, WL) == {"cache_prompt": False}  # synthetic: every prefill paid
    for reusing in (Workload(multiturn=True), Workload(trace="azure-conv")):
        assert request_extra_body(llama, reusing) == {"cache_prompt": True}  # as a user's server runs
    assert request_extra_body(FakeLauncher(), Workload(multiturn=True)) == FakeLauncher().request_extra_body()
