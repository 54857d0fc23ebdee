"""Issue 12: the named best is a re-measured best. A confirmation whose leaders regress walks
down the ranking instead of crowning a config measured once; ties go to the defaults.

Here the tests that start processes; the rest are in tests/unit/tuner/test_confirm.py."""

from __future__ import annotations

from kvtune.bench import client as bench_client
from kvtune.launchers.base import Knob
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.confirm import SEED_STEP
from kvtune.study.naming import name_best
from kvtune.study.spec import StudySpec

from tests.conftest import TINY


def scripted(throughputs: list[float], seeds: list[int]):
    """A real measurement whose output throughput is replaced by the next scripted value (the
    call order is: trials in order, then the confirmation's re-measurements)."""
    def bench(url, workload, options):
        run = bench_client.run(url, workload, options)
        run.metrics["output_throughput"] = throughputs[len(seeds)]
        seeds.append(workload.seed)
        return run
    return bench


def test_regressed_leaders_make_the_confirmation_walk_down(make_tuner):
    # first measurements: baseline 100, trials 1..3 = 200, 180, 150 (queued in that order);
    # re-measured: trial 1 -> 90 (a noise winner), baseline -> 100, then trial 2 -> 170.
    seeds: list[int] = []
    bench = scripted([100, 200, 180, 150, 90, 100, 170], seeds)
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4, 8)),))
    spec = StudySpec(study="walk", trials=4, workload=TINY, confirm_top=1,
                     informed_start=False).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    for speed in (2, 4, 8):
        tuner.study.enqueue_trial({"speed": speed})
    tuner.run()
    tuner.confirm()
    by_number = {o.number: o for o in tuner.outcomes()}
    assert by_number[2].confirmation is not None  # the next in line was re-measured
    assert by_number[3].confirmation is None
    naming = name_best(list(by_number.values()), "maximize")
    assert naming.best.number == 2 and naming.remeasured
    assert by_number[2].evidence == "re-measured, held" and by_number[3].evidence == "measured once"
    # the re-measurements used other prompts than the first measurements
    assert seeds[:4] == [TINY.seed] * 4 and set(seeds[4:]) == {TINY.seed + SEED_STEP}


def test_multi_objective_confirmation_remeasures_the_pareto_set_and_recomputes_it(make_tuner):
    from kvtune.study.ranking import pareto

    seeds: list[int] = []
    # first: baseline 100, trial 1 = 200 (slow TTFT), trial 2 = 150 (fast TTFT): both Pareto
    bench_values = [100, 200, 150, 120, 140, 90]

    def bench(url, workload, options):
        run = bench_client.run(url, workload, options)
        i = len(seeds)
        seeds.append(workload.seed)
        run.metrics["output_throughput"] = bench_values[i]
        run.metrics["p95_ttft_ms"] = {0: 300.0, 1: 900.0, 2: 200.0}.get(i, 250.0)
        return run

    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    spec = StudySpec(study="mo-conf", trials=3, workload=TINY, confirm_top=1, informed_start=False,
                     objective=["output_throughput", "ttft_p95"]).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    tuner.study.enqueue_trial({"speed": 2})
    tuner.study.enqueue_trial({"speed": 4})
    tuner.run()
    first_front = {o.number for o in pareto(tuner.outcomes(), ["maximize", "minimize"],
                                            values=lambda o: o.objectives)}
    assert first_front == {1, 2}
    tuner.confirm()
    outcomes = {o.number: o for o in tuner.outcomes()}
    assert all(outcomes[n].confirmation is not None for n in first_front)  # the whole front
    # confirmed figures: trial 1 -> (200+120)/2 = 160 tok/s at 575 ms, trial 2 -> 145 at 225 ms,
    # baseline -> 95 at 275 ms: the baseline is dominated by trial 2
    assert outcomes[1].scores == [160.0, 575.0]
    assert {o.number for o in pareto(list(outcomes.values()), ["maximize", "minimize"])} == {1, 2}


def test_a_transient_failure_in_the_confirmation_is_launched_again_not_a_verdict(make_tuner, tmp_path):
    # the search measures speed 2 and the baseline; then every confirmation start carries a port
    # clash for its first 2 starts: the first re-measurement's start and the runner's own retry
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(study="conf-clash", trials=2, workload=TINY, confirm_top=1, informed_start=False).validate()
    tuner, _ = make_tuner(spec, launcher)
    phases: list[str] = []
    tuner.cb.phase = lambda n, p: phases.append(p)
    tuner.run()
    count = tmp_path / "confirm-starts"
    launcher.always = {"port-clash": 1, "start-count-file": str(count), "faulty-starts": 2}
    confirmations = tuner.confirm()
    assert count.read_text() == "4"  # two clashes, then the trial's launch again, then the baseline
    assert confirmations["1"]["feasible"] and confirmations["1"]["metrics"]
    assert any("launching again" in p for p in phases)
    assert {o.number: o.evidence for o in tuner.outcomes()}[1] == "re-measured, held"


def test_a_confirmation_that_never_starts_records_no_verdict(make_tuner, tmp_path):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(study="conf-never", trials=2, workload=TINY, confirm_top=1, informed_start=False).validate()
    tuner, _ = make_tuner(spec, launcher)
    tuner.run()
    launcher.always = {"port-clash": 1}  # every start clashes from now on
    confirmations = tuner.confirm()
    assert confirmations == {}  # a port clash says nothing about a config: no verdict either way
    assert all(o.evidence == "measured once" for o in tuner.outcomes())


def test_the_confirmation_fits_in_what_is_left_of_the_time_budget(make_tuner):
    import time

    from kvtune.tuner.fleet import accounting

    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(study="conf-time", trials=2, workload=TINY, confirm_top=1, informed_start=False,
                     time_budget_s=3600).validate()
    tuner, _ = make_tuner(spec, launcher)
    phases: list[str] = []
    tuner.cb.phase = lambda n, p: phases.append(p)
    tuner.run()
    accounting.begin_clock(tuner.study, now=time.time() - 3600)  # the whole hour is spent
    assert tuner.confirm() == {}
    skipped = [p for p in phases if p.startswith("not re-measured")]
    assert len(skipped) == 2 and all("0 s of the time budget is left" in p for p in skipped)
