"""The ask -> launch -> measure -> tell loop, on the fake launcher (real processes, real client,
real SQLite storage).

Here the tests that start processes; the rest are in tests/unit/tuner/test_loop.py."""

import json
import statistics

import optuna
import pytest

from kvtune.bench import client as bench_client
from kvtune.kinds import Direction, FailureKind
from kvtune.knobs import Knob
from kvtune.study.outcome import RUNS_KEY
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.testing.virtual_bench import RecordingFakeLauncher, VirtualBench
from tests.conftest import TINY


def test_study_runs_baseline_first_and_finds_the_fastest(make_tuner):
    # the load on virtual time: a busy machine once measured the 50 ms config slower than 200/2
    launcher = RecordingFakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 4)),))
    tuner, events = make_tuner(
        StudySpec(study="s", trials=4, workload=TINY, targets=["ttft<1s"], objective="ttft_p95").validate(),
        launcher,
        bench=VirtualBench(launcher),
    )
    tuner.study.enqueue_trial({"speed": 4})  # after the baseline: the fast config is measured
    outcomes = tuner.run()
    # the space holds 2 configs + the baseline: once all are measured the study stops (a
    # duplicate would not spend the budget, so asking on could not buy a 4th measurement)
    assert len([o for o in outcomes if o.duplicate_of is None]) == 3
    assert tuner.budget_report["stopped"] == "space exhausted"
    outcomes = [o for o in outcomes if o.duplicate_of is None]
    assert outcomes[0].baseline and outcomes[0].number == 0 and outcomes[0].candidate.flags == {}
    assert all(o.feasible for o in outcomes)
    from kvtune.study.ranking import rank

    best = rank(outcomes, Direction.MINIMIZE)[0]
    assert best.candidate.flags == {"speed": 4}  # TTFT 50 ms vs the baseline's 200 ms
    assert best.metrics["p95_ttft_ms"] == pytest.approx(outcomes[0].metrics["p95_ttft_ms"] / 4)
    # every trial is COMPLETE with constraints, never FAIL
    states = {t.state for t in tuner.study.trials}
    assert states == {optuna.trial.TrialState.COMPLETE}
    assert all(RUNS_KEY in t.constraints for t in tuner.study.trials)


def test_rejected_flag_is_an_infeasible_complete_trial_and_the_study_goes_on(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("bogus", "fixed", value=True), Knob("speed", "choices", choices=(1, 2))))
    tuner, events = make_tuner(StudySpec(study="b", trials=3, workload=TINY).validate(), launcher)
    outcomes = tuner.run()
    assert len([o for o in outcomes if o.duplicate_of is None]) == 3  # duplicates are free
    assert outcomes[0].feasible  # the baseline has no bogus flag
    failed = [o for o in outcomes[1:] if o.duplicate_of is None]
    assert failed and all(not o.feasible for o in failed)
    assert "server failed to start: exited with status 2" in failed[0].reason
    assert "unrecognized arguments: --bogus-flag" in failed[0].reason
    assert failed[0].failure is FailureKind.START_FAILED and failed[0].launched
    t = tuner.study.trials[failed[0].number]
    assert t.state == optuna.trial.TrialState.COMPLETE and t.constraints[RUNS_KEY] > 0


def test_failed_requests_make_a_trial_infeasible(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("fail-status", "fixed", value=500), Knob("speed", "choices", choices=(1, 2))))
    tuner, _ = make_tuner(StudySpec(study="f", trials=2, workload=TINY).validate(), launcher)
    bad = tuner.run()[1]
    assert not bad.feasible
    assert bad.metrics["error_rate"] == 1.0
    assert "error_rate" in bad.reason
    assert bad.failure is FailureKind.REQUESTS_FAILED


def test_prescreen_skips_the_launch(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("min-slot", "fixed", value=8), Knob("speed", "choices", choices=(1, 2))))
    tuner, _ = make_tuner(StudySpec(study="p", trials=2, workload=TINY).validate(), launcher)
    o = tuner.run()[1]
    assert not o.feasible and not o.launched and o.reason.startswith("pre-screen:")
    assert o.failure is FailureKind.PRE_SCREEN


def test_two_targets_on_one_metric_are_two_constraints(make_tuner):
    """A floor and a ceiling on output throughput: both are kept (keyed by the whole target),
    and the broken one is the one reported."""
    spec = StudySpec(
        study="two",
        trials=1,
        workload=TINY,
        confirm_top=0,
        targets=["output_throughput>0.001", "output_throughput<0.002"],
    ).validate()
    tuner, _ = make_tuner(spec)
    o = tuner.run()[0]
    assert set(o.constraints) == {"output_throughput>0.001", "output_throughput<0.002", "error_rate<1%", RUNS_KEY}
    assert o.constraints["output_throughput>0.001"] <= 0 < o.constraints["output_throughput<0.002"]
    assert not o.feasible and o.failure is FailureKind.TARGET_MISSED
    assert o.reason.startswith("output_throughput ") and "breaks output_throughput<0.002" in o.reason
    assert set(tuner.study.trials[0].constraints) == set(o.constraints)


def test_resume_never_repeats_a_finished_trial(make_tuner):
    spec = StudySpec(study="r", trials=2, workload=TINY).validate()
    tuner, _ = make_tuner(spec)
    first = tuner.run()
    assert len(first) == 2
    spec2 = StudySpec(study="r", trials=3, workload=TINY).validate()
    tuner2, events = make_tuner(spec2)
    second = tuner2.run()
    assert len(second) == 3 and len(events) == 1  # only the new trial ran
    assert [o.to_dict() for o in second[:2]] == [o.to_dict() for o in first]


def test_resume_with_different_targets_is_refused(make_tuner):
    from kvtune.errors import SpecError

    make_tuner(StudySpec(study="x", trials=1, workload=TINY).validate())[0].run()
    with pytest.raises(SpecError, match="different targets"):
        make_tuner(StudySpec(study="x", trials=1, workload=TINY, targets=["ttft<1s"]).validate())


def test_interrupted_trial_is_rerun_on_resume(make_tuner):
    spec = StudySpec(study="i", trials=3, workload=TINY).validate()
    calls = []

    def interrupt_the_second(*a, **k):  # the baseline measures; the next trial is interrupted
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return bench_client.run(*a, **k)

    tuner, _ = make_tuner(spec, bench=interrupt_the_second)
    tuner.run_one()  # the baseline, queued first
    with pytest.raises(KeyboardInterrupt):
        tuner.run_one()
    interrupted, requeued = tuner.study.trials[1], tuner.study.trials[2]
    assert interrupted.state == optuna.trial.TrialState.FAIL and interrupted.user_attrs["interrupted"]
    assert requeued.state == optuna.trial.TrialState.WAITING  # queued again as it stopped

    tuner2, events = make_tuner(spec)
    outcomes = tuner2.run()
    assert len(outcomes) == 3
    assert outcomes[1].candidate.flags == {k: v for k, v in interrupted.params.items()}


@pytest.mark.parametrize(
    "fault,value,fragment,kind",
    [
        ("crash-after-requests", 2, "server crashed during the benchmark", FailureKind.CRASHED),
        ("hang-after-tokens", 2, "error_rate", FailureKind.REQUESTS_FAILED),
        ("fail-status", 503, "error_rate", FailureKind.REQUESTS_FAILED),
    ],
)
def test_server_faults_mid_benchmark_give_an_infeasible_trial(make_tuner, fault, value, fragment, kind):
    # Request faults are measured on virtual time (a loaded machine made the 2 s timeout hit the
    # baseline too); a crash is the process's exit, so it keeps the real client.
    launcher = RecordingFakeLauncher(
        knobs=(Knob(fault, "fixed", value=value), Knob("speed", "choices", choices=(1, 2)))
    )
    bench = None if fault == "crash-after-requests" else VirtualBench(launcher)
    spec = StudySpec(
        study="fault", trials=3, workload=TINY.__class__(**{**TINY.to_dict(), "request_timeout_s": 2.0})
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    outcomes = tuner.run()
    assert len([o for o in outcomes if o.duplicate_of is None]) == 3  # the study went on
    assert outcomes[0].feasible
    faulty = outcomes[1]
    assert not faulty.feasible and fragment in faulty.reason and faulty.failure is kind
    if fault == "hang-after-tokens":  # requests have bounded time: the hang became timeouts
        bench = json.loads((tuner.run_dir / "trials" / f"{faulty.number:04d}" / "bench.json").read_text())
        assert any(s["error"].startswith("timeout") for s in bench["runs"][0]["samples"])


def test_repeats_pool_samples_and_report_spread(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2)),))
    tuner, _ = make_tuner(StudySpec(study="rep", trials=1, workload=TINY, repeats=3).validate(), launcher)
    o = tuner.run()[0]
    assert o.metrics["num_requests"] == 3 * TINY.num_requests and o.metrics["repeats"] == 3
    assert "mean_prompt_ms_server" in o.metrics  # pooled runs keep the server-side split
    assert set(o.spread) >= {"output_throughput", "p95_ttft_ms"}
    # the spread is the coefficient of variation of each repeat's own figure (kept in bench.json)
    runs = json.loads((tuner.run_dir / "trials" / "0000" / "bench.json").read_text())["runs"]
    assert len(runs) == 3
    for key in ("output_throughput", "p95_ttft_ms"):
        per_run = [r["metrics"][key] for r in runs]
        assert o.spread[key] == pytest.approx(statistics.stdev(per_run) / statistics.fmean(per_run))


def test_capacity_finds_the_load_where_the_target_breaks(make_tuner):
    # TTFT = 50 ms + 100 ms per other stream in flight, measured on virtual time: exactly
    launcher = RecordingFakeLauncher(
        base_ttft_ms=50,
        base_itl_ms=1,
        always={"ttft-per-active-ms": 100},
        knobs=(Knob("speed", "choices", choices=(1,)),),
    )
    spec = StudySpec(
        study="cap",
        trials=1,
        workload=TINY.__class__(**{**TINY.to_dict(), "num_requests": 4, "output_tokens": 2}),
        objective="capacity",
        targets=["ttft_p95<400ms"],
        confirm_top=0,
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=VirtualBench(launcher))
    o = tuner.run()[0]
    assert o.feasible
    # the n-th stream in flight waits 50 + 100 (n - 1) ms: 350 ms at 4 users, 450 ms at 5
    assert o.metrics["capacity"] == 4.0
    levels = [(lv["load"], lv["met"]) for lv in o.load_levels]
    # doubling to the first break (8, measured twice: rechecked), then bisection down to 5, then
    # the final held level re-checked (issue 22 §6)
    assert levels == [
        (1.0, True),
        (2.0, True),
        (4.0, True),
        (8.0, False),
        (8.0, False),
        (6.0, False),
        (5.0, False),
        (4.0, True),
    ]


def test_confirmation_remeasures_top_and_baseline(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    spec = StudySpec(study="conf", trials=4, workload=TINY, objective="ttft_p95", confirm_top=2).validate()
    tuner, events = make_tuner(spec, launcher)
    tuner.run()
    confirmations = tuner.confirm()
    outcomes = tuner.outcomes()
    assert "0" in confirmations  # the baseline
    assert 2 <= len(confirmations) <= 3
    again = [o for o in outcomes if o.confirmation is not None]
    assert all(o.fresh_objective is not None for o in again)
    # resuming does not re-measure what was confirmed
    assert tuner.confirm() == confirmations


def test_multi_objective_study_reports_the_pareto_set(make_tuner):
    from kvtune.study.ranking import pareto

    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    spec = StudySpec(
        study="mo", trials=4, workload=TINY, confirm_top=0, objective=["output_throughput", "ttft_p95"]
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    outcomes = tuner.run()
    assert len(tuner.study.directions) == 2
    assert all(len(t.values) == 2 for t in tuner.study.trials)
    assert [o.direction for o in spec.objective_specs] == [Direction.MAXIMIZE, Direction.MINIMIZE]
    directions = [o.direction for o in spec.objective_specs]
    front = pareto(outcomes, directions, values=lambda o: o.objectives)  # the search's: it selects
    assert front and all(o.feasible for o in front)
    fastest = min((o for o in outcomes if o.feasible), key=lambda o: o.metrics["p95_ttft_ms"])
    assert fastest.candidate in [o.candidate for o in front]  # the lowest TTFT is never dominated
    assert pareto(outcomes, directions) == []  # the reported set is fresh runs alone: none without a confirmation
