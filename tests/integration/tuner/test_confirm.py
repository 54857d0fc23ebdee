"""Issue 12: the named best is a re-measured best; issue 28: the verdict decides it (screening,
then one candidate against the defaults D W W D on fresh servers), and the baseline is a sentinel.

Here the tests that start processes; the rest are in tests/unit/tuner/test_confirm.py."""

from __future__ import annotations

from kvtune.bench import client as bench_client
from kvtune.knobs import Knob
from kvtune.study.naming import name_best
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.confirmation import SEED_STEP, VERDICT_ATTR
from kvtune.tuner.sentinel import SENTINELS_ATTR
from kvtune.verdict import DecisionKind, Verdict
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


def test_the_verdict_screens_the_leaders_then_proves_one_against_the_defaults(make_tuner):
    # first measurements: baseline 100, trials 1..3 = 200, 180, 150 (queued in that order);
    # confirmation: the baseline's end sentinel 100 (the first D); screening of the top 2: trial 1
    # 90 (a noise winner), trial 2 170: trial 2 is chosen (mean log of search and screen); then
    # D W W D D W: trial 2 172, 171, the defaults 101, 99, trial 2 173: at 3 pairs, the cap, trial
    # 2 beats the defaults.
    seeds: list[int] = []
    bench = scripted([100, 200, 180, 150, 100, 90, 170, 172, 171, 101, 99, 173], seeds)
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4, 8)),))
    # one screening round: this is about the order of the runs (more rounds: test_selection.py)
    spec = StudySpec(
        study="verdict",
        trials=4,
        workload=TINY,
        confirm_top=2,
        confirm_rounds=1,
        confirm_pairs=3,
        informed_start=False,
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    for speed in (2, 4, 8):
        tuner.study.enqueue_trial({"speed": speed})
    tuner.run()
    started: list[int] = []
    tuner.cb.trial_started = lambda n, c, b: started.append(n)
    tuner.confirm()
    assert started == [0, 1, 2, 2, 2, 0, 0, 2]  # the sentinel, screening, then D W W D D W
    verdict = Verdict.from_dict(tuner.study.user_attrs[VERDICT_ATTR])
    assert verdict.kind is DecisionKind.BEATS_DEFAULTS and verdict.named == 2 and verdict.shortlist == (1, 2)
    assert verdict.counted.pairs == 3 and verdict.counted.screened == 2
    effect = verdict.effect("output_throughput")
    assert effect is not None and 1.6 < effect.low < effect.ratio < effect.high < 1.9
    outcomes = tuner.outcomes()
    naming = name_best(outcomes, "maximize")
    assert naming.best.number == 2 and naming.remeasured and naming.why == verdict.reason
    roles = [r["role"] for r in next(o for o in outcomes if o.number == 2).confirmation["runs"]]
    assert roles == ["screen", "proof", "proof", "proof"]
    # every re-measurement used other prompts than the first measurements
    assert seeds[:4] == [TINY.seed] * 4 and set(seeds[4:]) == {TINY.seed + SEED_STEP}


def test_a_config_within_the_noise_of_the_defaults_leaves_the_defaults(make_tuner):
    # first measurements: baseline 100, trials 1, 2 = 104, 102 (all within the noise); then the
    # baseline's end sentinel 101 (the first D), trial 1 103, 100, the defaults 102, 99, trial 1
    # 101: at the cap (3 pairs) the gain's whole interval is under 5%: tied, the defaults stay.
    seeds: list[int] = []
    bench = scripted([100, 104, 102, 101, 103, 100, 102, 99, 101], seeds)
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4, 8)),))
    spec = StudySpec(
        study="defaults-stay", trials=3, workload=TINY, confirm_top=1, confirm_pairs=3, informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=bench)
    for speed in (2, 4):
        tuner.study.enqueue_trial({"speed": speed})
    tuner.run()
    tuner.confirm()
    verdict = Verdict.from_dict(tuner.study.user_attrs[VERDICT_ATTR])
    assert verdict.kind is DecisionKind.TIED and verdict.named == 0 and verdict.candidate == 1
    naming = name_best(tuner.outcomes(), "maximize")
    assert naming.best.baseline and naming.remeasured and naming.tied_with == [1]
    assert len(seeds) == 9  # 3 first measurements, the sentinel, then 5 more runs of the proof


def test_the_baseline_sentinel_is_a_stored_series_measured_once_per_point_across_a_resume(make_tuner):
    # issue 22 §3: every `sentinel_every` measured trials and at the end; the end point is the
    # baseline's confirmation run, so the baseline is not re-measured twice in a row
    seeds: list[int] = []
    # baseline 100, trial 1 200, sentinel 95, trials 2, 3, sentinel 90, trial 4, end sentinel 88,
    # then the proof of trial 1 (205, 200) against the defaults (the end sentinel 88, then 90)
    bench = scripted([100, 200, 95, 180, 150, 90, 150, 88, 205, 200, 90, 200, 195], seeds)
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
    assert [r["role"] for r in baseline.confirmation["runs"]] == [
        "sentinel",
        "proof",
    ]  # the end sentinel is the first D
    report = tuner.study_report()["sentinel"]
    assert [p["measured"] for p in report["series"]] == [0, 2, 4, 5]
    assert report["drift"]["first"] == 100.0 and report["drift"]["last"] == 88.0
    # resumed (the same study opened again): nothing is measured again, the series is kept
    again, _ = make_tuner(spec, launcher, bench=bench)
    measured_before = len(seeds)
    again.run()
    again.confirm()
    assert len(seeds) == measured_before and len(again.study.user_attrs[SENTINELS_ATTR]) == 3
    again.coordinator.summarizes = False  # an extra worker never measures the sentinel
    assert again.sentinel(end=True) is None


def test_multi_objective_pareto_set_is_built_from_fresh_runs_and_the_best_named_by_the_verdict(make_tuner):
    """Issue 37: the search's Pareto set is re-measured (screening runs), the reported set comes from
    the fresh runs alone, and the single best is the verdict's, on the primary objective."""
    from kvtune.study.ranking import pareto

    seeds: list[int] = []
    # first: baseline 100 tok/s, trial 1 = 200 (slow TTFT), trial 2 = 150 (fast TTFT): both Pareto;
    # then the baseline's end sentinel 90 (the first D), the Pareto set re-measured: trial 1 150 at
    # 880 ms, trial 2 140 at 210 ms; then the verdict's proof of trial 1 (the search's leader on
    # throughput): W W D D W = 152, 151, the defaults 92, 91, trial 1 153 (all at 250 ms)
    bench_values = [100, 200, 150, 90, 150, 140, 152, 151, 92, 91, 153]
    ttft = {0: 300.0, 1: 900.0, 2: 200.0, 4: 880.0, 5: 210.0}

    def bench(url, workload, options):
        run = bench_client.run(url, workload, options)
        i = len(seeds)
        seeds.append(workload.seed)
        run.metrics["output_throughput"] = bench_values[i]
        run.metrics["p95_ttft_ms"] = ttft.get(i, 250.0)
        return run

    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    spec = StudySpec(
        study="mo-conf",
        trials=3,
        workload=TINY,
        confirm_top=1,
        confirm_pairs=3,
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
    assert len(seeds) == len(bench_values)
    outcomes = {o.number: o for o in tuner.outcomes()}
    roles = {n: [r["role"] for r in outcomes[n].confirmation["runs"]] for n in (0, 1, 2)}
    assert roles == {0: ["sentinel", "proof", "proof"], 1: ["screen", "proof", "proof", "proof"], 2: ["screen"]}
    # what the search saw stays; the fresh figures are the fresh runs' mean alone (never averaged
    # with the first: trial 1's 200 tok/s at 900 ms was the search's maximum)
    assert outcomes[1].objectives == [200.0, 900.0]
    assert outcomes[1].fresh_objectives == [151.5, 407.5] and outcomes[2].fresh_objectives == [140.0, 210.0]
    # the reported set: the defaults (91 tok/s at 250 ms, fresh) are dominated by trial 2
    assert [o.number for o in pareto(list(outcomes.values()), ["maximize", "minimize"])] == [1, 2]
    verdict = Verdict.from_dict(tuner.study.user_attrs[VERDICT_ATTR])
    assert (
        verdict.kind is DecisionKind.BEATS_DEFAULTS and verdict.named == 1 and verdict.objective == "output_throughput"
    )
    assert verdict.counted.pairs == 3 and verdict.counted.screened == 2  # the Pareto runs are screening runs
    naming = name_best(list(outcomes.values()), "maximize")
    assert naming.best.number == 1 and naming.why == verdict.reason and naming.verdict == verdict


def test_a_transient_failure_in_the_confirmation_is_launched_again_not_a_verdict(make_tuner, tmp_path):
    # the search measures speed 2 and the baseline; then every confirmation start carries a port
    # clash for its first 2 starts: the first re-measurement's start and the runner's own retry
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(
        study="conf-clash", trials=2, workload=TINY, confirm_top=1, confirm_pairs=3, informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    phases: list[str] = []
    tuner.cb.phase = lambda n, p: phases.append(p)
    tuner.run()
    count = tmp_path / "confirm-starts"
    launcher.always = {"port-clash": 1, "start-count-file": str(count), "faulty-starts": 2}
    confirmations = tuner.confirm()
    # two clashes, then one start per re-measurement (how many pairs the proof takes depends on
    # the noise this machine gives the fake server's wall-clock timings)
    runs = sum(len(c.get("runs") or []) for c in confirmations.values())
    assert runs >= 2 and int(count.read_text()) == 2 + runs
    assert confirmations["1"]["feasible"] and confirmations["1"]["metrics"]
    assert any("launching again" in p for p in phases)
    assert {o.number: o.evidence for o in tuner.outcomes()}[1] == "re-measured, held"


def test_a_confirmation_that_never_starts_keeps_the_defaults_and_says_why(make_tuner, tmp_path):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(study="conf-never", trials=2, workload=TINY, confirm_top=1, informed_start=False).validate()
    tuner, _ = make_tuner(spec, launcher)
    tuner.run()
    launcher.always = {"port-clash": 1}  # every start clashes from now on
    confirmations = tuner.confirm()
    assert confirmations == {}  # a port clash says nothing about a config: no run recorded
    assert all(o.evidence == "measured once" for o in tuner.outcomes())
    verdict = Verdict.from_dict(tuner.study.user_attrs[VERDICT_ATTR])
    assert verdict.kind is DecisionKind.NOT_ENOUGH_EVIDENCE and verdict.named == 0
    assert name_best(tuner.outcomes(), "maximize").best.baseline  # every reader names the defaults


def test_the_confirmation_fits_in_what_is_left_of_the_time_budget(make_tuner):
    import time

    from kvtune.tuner import accounting

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
