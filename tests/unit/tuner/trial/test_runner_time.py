"""Each launch's hardware-seconds by phase (tuner/trial/runner.py -> `TrialOutcome.time_spent`),
on a virtual clock with an injected start-up and benchmark: no process is started."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvtune.bench.options import BenchRun
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.targets import with_default_error_target
from kvtune.study.spec import StudySpec
from kvtune.study.time_spent import TimeSpent
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.testing.virtual_time import VirtualClock
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.disturbance import unwatched
from kvtune.tuner.trial.launch_retry import LaunchFailed
from kvtune.tuner.trial.runner import TrialRunner
from kvtune.workload import Workload

WL = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=2)
METRICS = {"output_throughput": 50.0, "p95_ttft_ms": 100.0, "error_rate": 0.0, "failed": 0.0}


@dataclass
class StoppedServer:
    """What the runner reads of a started server, without a process; stopping takes `stop_s`."""

    clock: VirtualClock
    stop_s: float = 0.5
    log: str = ""
    base_url: str = "http://127.0.0.1:18431"
    proc: None = None

    def stop(self) -> None:
        self.clock.advance(self.stop_s)

    def log_text(self) -> str:
        return self.log

    def exited_within(self, seconds: float) -> bool:
        return False

    def alive(self) -> bool:
        return True


@dataclass
class TimedStarter:
    """Starts in `startup_s` of which `waited_s` was the memory wait; `fail` raises instead."""

    clock: VirtualClock
    startup_s: float
    waited_s: float
    fail: bool = False
    log: str = ""

    def start(self, outcome, port, trial_dir):
        self.clock.advance(self.startup_s)
        if self.fail:
            raise LaunchFailed(FailureKind.START_FAILED, "server exited", transient=False)
        outcome.launched = True
        return StoppedServer(self.clock, log=self.log)


def timed_bench(clock: VirtualClock, warmup_s: float, measure_s: float):
    def bench(base_url, workload, options):
        options.on_phase("warmup")
        clock.advance(warmup_s)
        options.on_phase("measuring")
        clock.advance(measure_s)
        return BenchRun([], [], measure_s, dict(METRICS))

    return bench


def runner(tmp_path: Path, clock: VirtualClock, starter: TimedStarter, launcher=None) -> TrialRunner:
    spec = StudySpec(study="t", workload=WL, targets=["ttft<1s"]).validate()
    what = Subject(
        spec,
        launcher or FakeLauncher(),
        with_default_error_target(list(spec.targets)),
        bench=timed_bench(clock, 2.0, 10.0),
        monitor=unwatched,
    )
    r = TrialRunner(
        what, Placement(ports=lambda host: 18431), tmp_path / "pid.json", meter_for=lambda g: None, clock=clock
    )
    r.gpu_devices = []
    r._starter = lambda n: starter  # type: ignore[method-assign]
    return r


def test_a_measured_launch_records_its_seconds_by_phase(tmp_path):
    clock = VirtualClock()
    r = runner(tmp_path, clock, TimedStarter(clock, startup_s=30.0, waited_s=4.0))
    o, port = r.new_outcome(1, Candidate(flags={"speed": 2}), baseline=False)
    r.run(o, port, tmp_path / "t1", None)
    t = TimeSpent.from_dict(o.time_spent)
    assert t == TimeSpent(startup_s=26, warmup_s=2, measurement_s=10, teardown_s=0.5, waits_s=4, cache_hit=None)
    assert o.to_dict()["time_spent"]["total_s"] == 42.5  # what results.json keeps per trial


def test_a_failed_start_records_the_start_up_it_cost(tmp_path):
    clock = VirtualClock()
    r = runner(tmp_path, clock, TimedStarter(clock, startup_s=15.0, waited_s=0.0, fail=True))
    o, port = r.new_outcome(2, Candidate(), baseline=False)
    r.run(o, port, tmp_path / "t2", None)
    assert o.failure is FailureKind.START_FAILED
    assert TimeSpent.from_dict(o.time_spent) == TimeSpent(startup_s=15)


class CachingLauncher(FakeLauncher):
    """A backend whose log says its start-up loaded compiled graphs (vLLM's line, read by
    launchers/startup_log.py: tests/unit/launchers/test_startup_log.py)."""

    def compile_cache_hit(self, log_text: str) -> bool | None:
        return "from the cache" in log_text


def test_the_record_says_whether_the_start_up_loaded_compiled_graphs(tmp_path):
    clock = VirtualClock()
    r = runner(tmp_path, clock, TimedStarter(clock, 40.0, 0.0, log="loaded from the cache"), CachingLauncher())
    o, port = r.new_outcome(3, Candidate(), baseline=False)
    r.run(o, port, tmp_path / "t3", None)
    assert o.time_spent is not None and o.time_spent["cache_hit"] is True
    assert FakeLauncher().compile_cache_hit("loaded from the cache") is None  # compiles nothing
