"""Transient launch failures vs verdicts: a port clash or a start-up timeout is retried once on a
fresh port, a failure that happens again is recorded as transient and never copied to a
duplicate, and the launch waits (bounded) for the previous server's memory.

The Starter and the memory wait run on injected fakes (servers, memory reader, clock, sleep: no
real waiting); the loop tests run the fake server as real processes.

Here the tests that start processes; the rest are in tests/unit/tuner/trial/test_launch_retry.py (the
Starter) and tests/unit/tuner/trial/test_memory_wait.py (the memory wait)."""

from __future__ import annotations

import json
from pathlib import Path

from kvtune.kinds import FailureKind
from kvtune.knobs import Knob
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.trial.memory_wait import MemorySnapshot, MemoryWait
from tests.conftest import TINY

GiB = 2**30


# ---- the Starter on fake servers ------------------------------------------------------------------


def _no_sleep(s: float) -> None:
    raise AssertionError("the memory wait slept although memory was back")


# ---- the loop, on real fake-server processes ------------------------------------------------------


def faulty(count_file: Path, faulty_starts: int, **faults) -> FakeLauncher:
    """Every trial but the baseline runs one config whose first `faulty_starts` starts fail."""
    knobs = [Knob("speed", "choices", choices=(2,))]  # one choice: every proposal is the same
    knobs += [Knob(k, "fixed", value=v) for k, v in faults.items()]
    knobs += [
        Knob("start-count-file", "fixed", value=str(count_file)),
        Knob("faulty-starts", "fixed", value=faulty_starts),
    ]
    return FakeLauncher(knobs=tuple(knobs))


def quiet_memory(tuner) -> None:
    """Memory is always back: the loop tests do not depend on what else this host runs."""
    tuner.runner.memory_wait = MemoryWait(read=lambda: MemorySnapshot(64 * GiB), sleep=_no_sleep)


def test_a_port_clash_on_the_first_start_is_retried_and_measured(make_tuner, tmp_path):
    count = tmp_path / "starts"
    tuner, _ = make_tuner(
        StudySpec(study="clash", trials=2, workload=TINY).validate(), faulty(count, 1, **{"port-clash": 1})
    )
    quiet_memory(tuner)
    trial = tuner.run()[1]
    assert count.read_text() == "2"  # the clash, then the retry
    assert trial.feasible and trial.metrics and not trial.transient and trial.failure is None
    assert trial.log_path.endswith("server.retry1.log")
    assert "Address already in use" in (Path(trial.log_path).parent / "server.log").read_text()


def test_a_slow_first_start_is_retried_and_measured(make_tuner, tmp_path):
    count = tmp_path / "starts"
    tuner, _ = make_tuner(
        StudySpec(study="slow", trials=2, workload=TINY, startup_timeout_s=1).validate(),
        faulty(count, 1, **{"startup-delay-s": 60}),
    )
    quiet_memory(tuner)
    trial = tuner.run()[1]
    assert count.read_text() == "2" and trial.feasible and not trial.transient


def test_a_duplicate_of_a_transient_failure_is_measured_again(make_tuner, tmp_path):
    count = tmp_path / "starts"
    tuner, _ = make_tuner(
        StudySpec(study="dup", trials=3, workload=TINY, confirm_top=0).validate(), faulty(count, 2, **{"port-clash": 1})
    )
    quiet_memory(tuner)
    _, first, second = tuner.run()
    assert first.candidate == second.candidate
    assert first.failure is FailureKind.PORT_BUSY and first.transient and not first.feasible
    assert "transient" in first.reason
    assert first.to_dict()["transient"] is True  # results.json says which
    assert TrialOutcome.from_dict(json.loads(json.dumps(first.to_dict()))).transient
    # measured again, not copied: its own server (the third start), its own measurement
    assert second.duplicate_of is None and second.feasible and second.metrics
    assert count.read_text() == "3"
    assert tuner.records.find_measured(second.candidate) is not None
    assert tuner.records.find_measured(second.candidate).number == second.number
