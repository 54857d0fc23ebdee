"""Issue 12: the named best is a re-measured best; issue 22: it is decided in duels of paired
re-measurements (a leader that loses hands over to the rival), and the baseline is a sentinel.

Here the tests that start processes; the rest are in tests/unit/tuner/test_confirm.py."""

from __future__ import annotations

from kvtune.bench import client as bench_client
from kvtune.launchers.base import Knob
from kvtune.study.naming import name_best
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.confirm import DECISION_ATTR, SEED_STEP
from kvtune.tuner.sentinel import SENTINELS_ATTR
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


def test_a_leader_that_loses_its_duel_hands_over_to_the_rival_who_faces_the_next(make_tuner):
    # first measurements: baseline 100, trials 1..3 = 200, 180, 150 (queued in that order);
    # confirmation: the baseline's end sentinel 100, then trial 1 (90, a noise winner) against
    # trial 2 (170): trial 2 wins; then trial 2 (172) against trial 3 (120): trial 2 wins again.
    seeds: list[int] = []
    bench = scripted([100, 200, 180, 150, 100, 90, 170, 172, 120], seeds)
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4, 8)),))
    spec = StudySpec(
        study="walk", trials=4, workload=TINY, confirm_top=1, confirm_pairs=1, informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    for speed in (2, 4, 8):
        tuner.study.enqueue_trial({"speed": speed})
    tuner.run()
    started: list[int] = []
    tuner.cb.trial_started = lambda n, c, b: started.append(n)
    tuner.confirm()
    assert started == [0, 1, 2, 2, 3]  # the sentinel, then A B per duel
    decision = tuner.study.user_attrs[DECISION_ATTR]
    assert [(d["leader"], d["rival"], d["winner"]) for d in decision["duels"]] == [(1, 2, 2), (2, 3, 2)]
    outcomes = tuner.outcomes()
    naming = name_best(outcomes, "maximize")
    assert naming.best.number == 2 and naming.remeasured and naming.why == decision["why"]
    assert naming.why.startswith("trial 2 beat trial 3 by more than the noise (ratio 1.43")
    assert {o.number: o.evidence for o in outcomes}[1] == "re-measured, held"
    # every re-measurement used other prompts than the first measurements
    assert seeds[:4] == [TINY.seed] * 4 and set(seeds[4:]) == {TINY.seed + SEED_STEP}


def test_a_leader_within_the_noise_of_the_defaults_faces_the_defaults_first(make_tuner):
    # first measurements: baseline 100, trials 1, 2 = 104, 102 (all within the noise); then the
    # baseline's end sentinel 101 (pair 1's B), trial 1 103, then pair 2: 101 / 102. The duel of
    # trial 1 against the defaults ties, the defaults win it (nothing is simpler), and no duel
    # between the two tuned configs is run: it could not make either beat the defaults.
    seeds: list[int] = []
    bench = scripted([100, 104, 102, 101, 103, 101, 102], seeds)
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4, 8)),))
    spec = StudySpec(
        study="defaults-first", trials=3, workload=TINY, confirm_top=1, confirm_pairs=2, informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    for speed in (2, 4):
        tuner.study.enqueue_trial({"speed": speed})
    tuner.run()
    tuner.confirm()
    decision = tuner.study.user_attrs[DECISION_ATTR]
    assert [(d["leader"], d["rival"], d["winner"]) for d in decision["duels"]] == [(1, 0, 0)]
    assert decision["tie"] and decision["tied_with"] == [1]
    naming = name_best(tuner.outcomes(), "maximize")
    assert naming.best.baseline and naming.remeasured
    assert len(seeds) == 7  # 3 first measurements, the sentinel, then 3 more runs of the duel


def test_the_baseline_sentinel_is_a_stored_series_measured_once_per_point_across_a_resume(make_tuner):
    # issue 22 §3: every `sentinel_every` measured trials and at the end; the end point is the
    # baseline's confirmation run, so the baseline is not re-measured twice in a row
    seeds: list[int] = []
    # baseline 100, trial 1 200, sentinel 95, trials 2, 3, sentinel 90, trial 4, end sentinel 88,
    # then the duels: trial 1 (205) against the defaults (the end sentinel, 88: with 1-2 dof of
    # noise a 2x gap is still within it, so the defaults come first), then against trial 2
    bench = scripted([100, 200, 95, 180, 150, 90, 150, 88, 205, 200, 190, 200, 195], seeds)
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4, 8)),))
    spec = StudySpec(
        study="sentinel", trials=5, workload=TINY, confirm_top=1, confirm_pairs=2, informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    tuner.sentinel_every = 2
    for speed in (2, 4, 8, 1):
        tuner.study.enqueue_trial({"speed": speed})
    tuner.run()
    points = tuner.study.user_attrs[SENTINELS_ATTR]
    assert [(p["measured"], p["objective"], p["end"]) for p in points] == [(2, 95.0, False), (4, 90.0, False)]
    tuner.confirm()
    points = tuner.study.user_attrs[SENTINELS_ATTR]
    assert [(p["measured"], p["objective"], p["end"]) for p in points][-1] == (5, 88.0, True)
    baseline = next(o for o in tuner.outcomes() if o.baseline)
    assert [r["role"] for r in baseline.confirmation["runs"]] == ["sentinel"]
    report = tuner.study_report()["sentinel"]
    assert [p["measured"] for p in report["series"]] == [0, 2, 4, 5]
    assert report["drift"]["first"] == 100.0 and report["drift"]["last"] == 88.0
    # resumed (the same study opened again): nothing is measured again, the series is kept
    again, _ = make_tuner(spec, launcher, bench=bench)
    measured_before = len(seeds)
    again.run()
    again.confirm()
    assert len(seeds) == measured_before and len(again.study.user_attrs[SENTINELS_ATTR]) == 3
    again.wait_for_others = False  # an extra worker never measures the sentinel
    assert again.sentinel(end=True) is None


def test_multi_objective_confirmation_remeasures_the_pareto_set_and_recomputes_it(make_tuner):
    from kvtune.study.ranking import pareto

    seeds: list[int] = []
    # first: baseline 100, trial 1 = 200 (slow TTFT), trial 2 = 150 (fast TTFT): both Pareto;
    # then the baseline's end sentinel (its re-measurement: 90), trial 1 -> 120, trial 2 -> 140
    bench_values = [100, 200, 150, 90, 120, 140]

    def bench(url, workload, options):
        run = bench_client.run(url, workload, options)
        i = len(seeds)
        seeds.append(workload.seed)
        run.metrics["output_throughput"] = bench_values[i]
        run.metrics["p95_ttft_ms"] = {0: 300.0, 1: 900.0, 2: 200.0}.get(i, 250.0)
        return run

    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    spec = StudySpec(
        study="mo-conf",
        trials=3,
        workload=TINY,
        confirm_top=1,
        informed_start=False,
        objective=["output_throughput", "ttft_p95"],
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    tuner.study.enqueue_trial({"speed": 2})
    tuner.study.enqueue_trial({"speed": 4})
    tuner.run()
    first_front = {o.number for o in pareto(tuner.outcomes(), ["maximize", "minimize"], values=lambda o: o.objectives)}
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
    # two clashes, then one start per re-measurement (how many pairs the duel takes depends on the
    # noise this machine gives the fake server's wall-clock timings)
    runs = sum(len(c.get("runs") or []) for c in confirmations.values())
    assert runs >= 2 and int(count.read_text()) == 2 + runs
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
    spec = StudySpec(
        study="conf-time", trials=2, workload=TINY, confirm_top=1, informed_start=False, time_budget_s=3600
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    phases: list[str] = []
    tuner.cb.phase = lambda n, p: phases.append(p)
    tuner.run()
    accounting.begin_clock(tuner.study, now=time.time() - 3600)  # the whole hour is spent
    assert tuner.confirm() == {}
    skipped = [p for p in phases if p.startswith("not re-measured")]
    assert len(skipped) == 2 and all("0 s of the time budget is left" in p for p in skipped)
