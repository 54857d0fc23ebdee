"""The exact early stop in a measurement: the load client's hook cancels what is in flight, the
repeats share one watch, and a trial that can no longer meet its targets ends early as an
infeasible COMPLETE trial that says why (fake launcher: real processes and storage; in the loop
the load is measured on virtual time, so a loaded machine cannot move a 300 ms TTFT).

Here the tests that start processes; the rest are in tests/unit/tuner/test_early_stop_loop.py."""

from __future__ import annotations

import io
import json

import optuna
from rich.console import Console

from kvtune.artifacts.summary import summarize
from kvtune.cli.run_text import print_summary
from kvtune.kinds import FailureKind
from kvtune.knobs import Knob
from kvtune.study.outcome import RUNS_KEY
from kvtune.study.results import StudyResults, choose_best
from kvtune.study.spec import StudySpec
from kvtune.testing.virtual_bench import RecordingFakeLauncher, VirtualBench
from kvtune.tuner.assemble import prepare
from kvtune.workload import Workload

WL = Workload(
    concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=16, warmup_requests=1, request_timeout_s=10
)


def slow() -> RecordingFakeLauncher:
    """A 300 ms TTFT server, one config; each test its own (the launcher records its commands)."""
    return RecordingFakeLauncher(base_ttft_ms=300, knobs=(Knob("speed", "choices", choices=(1,)),))


def virtual_tuner(make_tuner, spec: StudySpec, launcher: RecordingFakeLauncher):
    """The tuner over real fake-server processes, its load measured on virtual time."""
    tuner, _ = make_tuner(spec, launcher, bench=VirtualBench(launcher))
    return tuner


# ---- in the loop -----------------------------------------------------------------------------
def test_a_slow_config_against_a_tight_target_stops_early_infeasible_and_complete(make_tuner):
    spec = StudySpec(
        study="es",
        trials=2,
        workload=WL,
        targets=["ttft_p95<100ms"],
        confirm_top=0,
        startup_timeout_s=20,
        informed_start=False,
    ).validate()
    tuner = virtual_tuner(make_tuner, spec, slow())
    base, o = tuner.run()
    # the baseline is as slow, but measured in full: its figures anchor the comparisons
    assert base.metrics["num_requests"] == 16 and "early_stopped" not in base.metrics
    assert not base.feasible and base.reason.startswith("ttft_p95 ")
    # two requests over 100 ms out of 16 already make p95 > 100 ms, whatever the other 14 do
    assert o.reason == "stopped after 2 of 16 requests: 2 over TTFT 100 ms, p95<100ms can no longer hold"
    assert o.failure is FailureKind.TARGET_MISSED and not o.feasible
    assert o.metrics["num_requests"] == 2 and o.metrics["planned_requests"] == 16
    assert o.metrics["early_stopped"] == 1.0 and o.metrics["early_stop_saved_s"] > 0
    t = tuner.study.trials[1]
    assert t.state == optuna.trial.TrialState.COMPLETE  # not pruned: the sampler learns from it
    assert t.constraints["ttft_p95<100ms"] > 0
    assert o.constraints[RUNS_KEY] <= 0  # the server ran: only the target broke
    bench = json.loads((tuner.run_dir / "trials" / "0001" / "bench.json").read_text())
    assert bench["runs"][0]["stopped"] == o.reason and len(bench["runs"][0]["samples"]) == 2


def test_no_early_stop_measures_every_request(make_tuner):
    spec = StudySpec(
        study="full",
        trials=2,
        workload=WL,
        targets=["ttft_p95<100ms"],
        confirm_top=0,
        startup_timeout_s=20,
        early_stop=False,
        informed_start=False,
    ).validate()
    tuner = virtual_tuner(make_tuner, spec, slow())
    _, o = tuner.run()
    assert o.metrics["num_requests"] == 16 and not o.metrics.get("early_stopped")
    assert o.failure is FailureKind.TARGET_MISSED and o.reason.startswith("ttft_p95 ")


def test_the_baseline_defines_relative_targets_and_is_never_stopped(make_tuner):
    # baseline TTFT 200 ms; ttft<1.5x = 300 ms; the speed-0.25 config answers in 800 ms
    launcher = RecordingFakeLauncher(base_ttft_ms=200, knobs=(Knob("speed", "choices", choices=(0.25,)),))
    spec = StudySpec(
        study="rel",
        trials=2,
        workload=WL,
        targets=["ttft_p95<1.5x"],
        confirm_top=0,
        startup_timeout_s=20,
        informed_start=False,
    ).validate()
    tuner = virtual_tuner(make_tuner, spec, launcher)
    base, slow = tuner.run()
    assert base.baseline and base.feasible and base.metrics["num_requests"] == 16
    assert "early_stopped" not in base.metrics
    assert slow.metrics["num_requests"] == 2 and slow.failure is FailureKind.TARGET_MISSED
    assert slow.reason.startswith("stopped after 2 of 16 requests: 2 over TTFT ")  # 1.5 x baseline


def test_repeats_stop_together(make_tuner):
    spec = StudySpec(
        study="rep",
        trials=2,
        workload=WL,
        targets=["ttft_p95<100ms"],
        confirm_top=0,
        startup_timeout_s=20,
        repeats=3,
        informed_start=False,
    ).validate()
    tuner = virtual_tuner(make_tuner, spec, slow())
    _, o = tuner.run()
    assert o.reason.startswith("stopped after 3 of 48 requests: 3 over TTFT 100 ms")
    runs = json.loads((tuner.run_dir / "trials" / "0001" / "bench.json").read_text())["runs"]
    assert len(runs) == 1  # the two repeats left never ran


def test_the_summary_says_how_much_time_early_stops_saved(make_tuner, tmp_path):
    spec = StudySpec(
        study="sum",
        trials=2,
        workload=WL,
        targets=["ttft_p95<100ms"],
        confirm_top=0,
        startup_timeout_s=20,
        informed_start=False,
    ).validate()
    launcher = slow()
    tuner = virtual_tuner(make_tuner, spec, launcher)
    outcomes = tuner.run()
    p = prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"))
    payload = {"trials": [o.to_dict() for o in outcomes], "budget": tuner.budget_report}
    s = summarize(
        tuner.run_dir,
        StudyResults(choose_best(outcomes, spec.objective_specs), payload),
        outcomes,
        spec.objective_specs,
        p.targets,
        "127.0.0.1",
        8080,
    )
    assert s.early_stop is not None and s.early_stop.trials == 1 and s.early_stop.saved_s > 0
    assert payload["early_stop"]["trials"] == 1
    # no feasible config: the baseline, measured in full, is the nearer miss and the nearest
    # config; the stopped trial's figures rest on two requests: shown as stopped, never a best figure
    first, second = s.nearest_misses
    assert first.outcome.baseline and not first.outcome.stopped_early
    assert second.outcome.number == 1 and second.outcome.stopped_early
    works = s.what_would_work
    assert works is not None and works.nearest == first.outcome.number
    assert [b.trial for b in works.missed] == [first.outcome.number]
    out = io.StringIO()
    print_summary(p, s, Console(file=out, width=200))
    text = out.getvalue()
    assert "Early stop: 1 trial(s) stopped once a target could no longer hold, saving about" in text
    assert "stopped early after" in text and "not a full measurement" in text
    assert "would accept it" not in text
