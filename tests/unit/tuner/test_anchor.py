"""Relative targets anchored only on quiet evidence (tuner/anchor.py): a disturbed baseline is
measured again once the machine is quiet, earlier trials are judged again against the quiet
figures, and the verdict's shortlist follows; with no quiet baseline to be had, relative
targets are left to the verdict's fresh paired runs. In-memory study; a scripted look at the
machine and a scripted fresh launch of the defaults (the figures of the demo under a busy
first minute: 18.7 ms TPOT measured disturbed, 12.6 ms quiet)."""

from __future__ import annotations

from dataclasses import dataclass, field

import optuna

from kvtune.interference import Interference
from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.targets import parse_targets
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import parse_objectives
from kvtune.study.time_spent import ANCHOR, SEARCH, StudyTime, TimeSpent
from kvtune.study.verdict_evidence import evidence_of, goal_of, policy_of
from kvtune.tuner import accounting
from kvtune.tuner.anchor import ANCHOR_ATTR, Anchoring, anchored_on, rejudged, runner_measure
from kvtune.tuner.events import Callbacks
from kvtune.tuner.ledger import StudyLedger
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.trial import scoring
from kvtune.verdict import Measure, Role, next_step
from kvtune.verdict.engine import candidates

TARGETS = parse_targets(["tpot_median<0.5x", "error_rate<1%"])
OBJECTIVES = parse_objectives("output_throughput")
BUSY = {"disturbed": True, "foreign_cores": 1.9, "reason": "foreign CPU 1.90 cores"}
QUIET = {"disturbed": False, "foreign_cores": 0.02, "reason": ""}


def measured(n: int, tpot: float, throughput: float, parallel: int | None = None, busy: bool = False) -> TrialOutcome:
    return TrialOutcome(
        number=n,
        candidate=Candidate(flags={} if parallel is None else {"parallel": parallel}),
        argv=[],
        env={},
        baseline=parallel is None,
        launched=True,
        metrics={"median_tpot_ms": tpot, "output_throughput": throughput, "error_rate": 0.0, "num_requests": 16},
        interference=BUSY if busy else QUIET,
    )


def judged(o: TrialOutcome, baseline: TrialOutcome | None) -> TrialOutcome:
    scoring.judge(o, scoring.resolved_targets(TARGETS, baseline, o), TARGETS, OBJECTIVES)
    return o


def store(study: optuna.Study, o: TrialOutcome) -> None:
    study.add_trial(optuna.trial.create_trial(value=o.objective or 0.0, user_attrs={"outcome": to_jsonable(o)}))


def demo_study() -> tuple[optuna.Study, TrialOutcome]:
    """The demo's search under a busy first minute: the defaults measured disturbed (18.7 ms, so
    `tpot_median<0.5x` is 9.35 ms), then --parallel 2 at 8.0 ms and --parallel 1 at 5.5 ms."""
    study = optuna.create_study(direction="maximize")
    base = judged(measured(0, 18.7, 40.0, busy=True), None)
    store(study, base)
    store(study, judged(measured(1, 8.0, 56.0, parallel=2), base))
    store(study, judged(measured(2, 5.5, 50.0, parallel=1), base))
    store(study, judged(measured(3, 19.0, 52.0, parallel=8), base))
    return study, base


@dataclass
class Scripted:
    """The machine as looked at (busy for the first `busy_looks` looks) and the defaults' fresh
    measurements (`tpots`, disturbed when `busy_runs` says so)."""

    busy_looks: int = 0
    tpots: list[float] = field(default_factory=lambda: [12.6])
    busy_runs: list[bool] = field(default_factory=lambda: [False])
    looks: int = 0
    launched: list[int] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)

    def look(self) -> Interference | None:
        self.looks += 1
        busy = self.looks <= self.busy_looks
        return Interference(
            seconds=2.0,
            cpus=2,
            foreign_cores=1.9 if busy else 0.0,
            foreign_cores_peak=None,
            server_cores=None,
            own_cores=None,
            steal_share=None,
            cpu_pressure=None,
            memory_pressure=None,
            disturbed=busy,
            reason="foreign CPU 1.90 cores" if busy else "quiet",
        )

    def measure(self, baseline: TrialOutcome, k: int) -> TrialOutcome | None:
        self.launched.append(k)
        i = min(k - 1, len(self.tpots) - 1)
        again = judged(measured(0, self.tpots[i], 41.0, busy=self.busy_runs[min(k - 1, len(self.busy_runs) - 1)]), None)
        # the runner's record of the launch (tuner/trial/runner.py): the k-th measures 10 s longer
        again.time_spent = TimeSpent(startup_s=30.0, warmup_s=2.0, measurement_s=10.0 * k, teardown_s=1.0).to_dict()
        return again

    def anchoring(self, study: optuna.Study) -> Anchoring:
        cb = Callbacks(phase=lambda n, p: self.phases.append(p))
        return Anchoring(study, TARGETS, OBJECTIVES, cb, self.measure, self.look)


def shortlist(records: TrialRecords) -> int:
    """The config the verdict tests (`confirm_top: 1`, as the demo): its shortlist's only one;
    the proof then opens with the defaults (D W W D)."""
    goal = goal_of("maximize", TARGETS, "output_throughput")
    policy = policy_of(1, 3)
    step = next_step(evidence_of(records.outcomes()), goal, policy)
    assert isinstance(step, Measure) and step.role is Role.PROOF and step.config == 0
    return candidates(evidence_of(records.outcomes()), goal, policy.headroom)[0]


def feasible(records: TrialRecords) -> dict[int, bool]:
    return {o.number: o.feasible for o in records.outcomes()}


def test_a_disturbed_baseline_anchors_only_provisionally_and_a_quiet_one_for_good():
    base = measured(0, 18.7, 40.0, busy=True)
    assert anchored_on(base, {}) is base  # provisional: its `disturbed` keeps the early stop off it
    quiet = anchored_on(base, {"quiet": {"metrics": {"median_tpot_ms": 12.6}, "interference": QUIET}})
    assert quiet is not None and quiet.metrics == {"median_tpot_ms": 12.6} and not quiet.disturbed
    assert quiet.number == 0 and quiet.baseline and base.metrics["median_tpot_ms"] == 18.7
    calm = measured(0, 12.0, 40.0)
    assert anchored_on(calm, {"quiet": {"metrics": {"median_tpot_ms": 99.0}}}) is calm  # a quiet first one stays


def test_a_quiet_remeasurement_rejudges_earlier_trials_and_changes_the_shortlist():
    study, base = demo_study()
    records = TrialRecords(study)
    assert feasible(records) == {0: False, 1: True, 2: True, 3: False}
    assert shortlist(records) == 1  # --parallel 2, the faster of the two that met 9.35 ms
    script = Scripted(busy_looks=1)
    anchoring = script.anchoring(study)

    anchoring.after_trial(records.measured_baseline(), records.outcomes())  # still busy: wait
    assert script.launched == [] and "still busy" in script.phases[-1]
    anchoring.after_trial(records.measured_baseline(), records.outcomes())  # quiet now: measured
    assert script.launched == [1]
    records.refresh()
    assert feasible(records) == {0: False, 1: False, 2: True, 3: False}  # 8.0 ms misses 6.3 ms
    assert shortlist(records) == 2  # --parallel 1, which met both bounds, is tested
    assert "tpot_median<0.5x = 6.3 (was 9.35" in script.phases[-1] and "trial 1 now misses" in script.phases[-1]
    anchor = records.anchor()
    assert anchor is not None and anchor.metrics["median_tpot_ms"] == 12.6 and not anchor.disturbed
    assert not anchoring.wanted(records.measured_baseline())  # anchored: never measured again
    assert TrialRecords(study).outcomes()[1].reason.startswith("tpot_median 8 ms breaks")  # a resume reads it too
    block = StudyLedger(study, records, lambda: None, "output_throughput").report(10)["anchor"]
    assert block["quiet"]["metrics"]["median_tpot_ms"] == 12.6 and len(block["runs"]) == 1  # results.json's


def test_a_trial_told_after_the_anchor_moved_is_judged_against_the_quiet_figures():
    study, base = demo_study()
    records = TrialRecords(study)
    script = Scripted()
    script.anchoring(study).after_trial(base, records.outcomes())
    records.refresh()
    later = judged(measured(4, 7.0, 58.0, parallel=3), records.anchor())
    assert not later.feasible and "breaks tpot_median<0.5x" in later.reason


def test_no_quiet_baseline_within_the_bound_leaves_relative_targets_to_the_verdict():
    study, base = demo_study()
    records = TrialRecords(study)
    script = Scripted(busy_looks=100, tpots=[17.0, 16.0], busy_runs=[True])
    anchoring = script.anchoring(study)
    anchoring.before_verdict(records.measured_baseline(), records.outcomes())
    assert script.launched == [1, 2]  # bounded: ANCHOR_LAUNCHES fresh launches, no more
    assert script.phases[-1].startswith("no quiet measurement of the defaults in 2 tries: tpot_median<0.5x")
    records.refresh()
    assert study.user_attrs[ANCHOR_ATTR]["gave_up"]
    # the search's judgement keeps the absolute targets only; the ranking is by throughput
    assert all("tpot_median<0.5x" not in o.constraints for o in records.outcomes())
    assert feasible(records) == {0: True, 1: True, 2: True, 3: True}
    assert shortlist(records) == 1
    anchoring.before_verdict(records.measured_baseline(), records.outcomes())
    assert script.launched == [1, 2]  # given up once: not tried again (a resume)


def test_each_fresh_measurement_of_the_defaults_is_the_anchors_hardware_time():
    study, base = demo_study()
    accounting.begin_clock(study, now=0.0)
    records = TrialRecords(study)
    script = Scripted(busy_looks=100, tpots=[17.0, 16.0], busy_runs=[True])  # two runs, both disturbed
    script.anchoring(study).before_verdict(records.measured_baseline(), records.outcomes())
    assert script.launched == [1, 2]
    block = StudyLedger(study, records, lambda: None, "output_throughput").report(10)["anchor"]
    assert [r["time_spent"]["measurement_s"] for r in block["runs"]] == [10.0, 20.0]  # results.json's runs
    st = StudyTime.of(records.outcomes(), anchor=block)
    assert st.parts[ANCHOR].launches == 2 and st.parts[SEARCH].launches == 0  # the demo's trials kept no record
    assert st.parts[ANCHOR].spent == TimeSpent(startup_s=60.0, warmup_s=4.0, measurement_s=30.0, teardown_s=2.0)
    assert st.lines()[0] == "hardware time: 1m36s in 2 launches: anchor 1m36s (2 launches)"
    assert study.user_attrs[accounting.CLOCK_ATTR]["last"] > 0.0  # the launches moved the budget's clock


def test_a_quiet_first_measurement_is_never_measured_again():
    study = optuna.create_study(direction="maximize")
    store(study, judged(measured(0, 12.6, 40.0), None))
    records = TrialRecords(study)
    script = Scripted()
    script.anchoring(study).before_verdict(records.measured_baseline(), records.outcomes())
    assert script.launched == [] and script.looks == 0 and ANCHOR_ATTR not in study.user_attrs


def test_what_cannot_be_rejudged_keeps_its_judgement():
    base = measured(0, 18.7, 40.0, busy=True)
    cut = judged(measured(5, 30.0, 20.0, parallel=4), base)
    cut.metrics = {**(cut.metrics or {}), "early_stopped": 1.0}  # partial figures: the cut stands
    assert rejudged(cut, TARGETS, OBJECTIVES, {"median_tpot_ms": 100.0}) is None
    crashed = scoring.infeasible(measured(6, 5.0, 50.0, parallel=2), TARGETS, FailureKind.CRASHED, "died")
    assert rejudged(crashed, TARGETS, OBJECTIVES, {"median_tpot_ms": 12.6}) is None


def test_the_summary_and_show_say_what_relative_targets_were_judged_against():
    from kvtune.tuner.anchor import summary_line

    assert summary_line(None) is None and summary_line({}) is None  # a quiet first measurement: nothing to say
    study, base = demo_study()
    records = TrialRecords(study)
    Scripted(busy_looks=0, tpots=[17.0, 12.6], busy_runs=[True, False]).anchoring(study).before_verdict(
        records.measured_baseline(), records.outcomes()
    )
    block = StudyLedger(study, records, lambda: None, "output_throughput").report(10)["anchor"]
    assert summary_line(block) == (
        "Relative targets were anchored on the defaults measured again, quiet (anchor run 2 of 2): "
        "their first measurement was disturbed, so every trial was judged against the quiet one."
    )
    gave_up, _ = demo_study()
    Scripted(busy_looks=100, tpots=[17.0, 16.0], busy_runs=[True]).anchoring(gave_up).before_verdict(
        base, TrialRecords(gave_up).outcomes()
    )
    line = summary_line(gave_up.user_attrs[ANCHOR_ATTR])
    assert line is not None and line.startswith("Relative targets: no quiet measurement of the defaults in 2 tries")
    assert "judged only on the verdict's fresh paired runs" in line
    assert summary_line({"runs": [{"quiet": False}]}) == (
        "Relative targets are judged provisionally against a disturbed measurement of the defaults "
        "(1 anchor run(s) so far disturbed too)."
    )


@dataclass
class TransientThenRuns:
    """A trial runner whose first launch fails transiently (a start-up that timed out after a
    memory wait) and whose next one runs."""

    launched: list[str] = field(default_factory=list)

    def new_outcome(self, number: int, candidate: Candidate, baseline: bool) -> tuple[TrialOutcome, int]:
        return TrialOutcome(number=number, candidate=candidate, argv=[], env={}, baseline=baseline), 8000

    def run(self, o: TrialOutcome, port: int, folder, baseline, early_stop: bool = True) -> TrialOutcome:
        self.launched.append(folder.name)
        o.transient = len(self.launched) == 1
        spent = (
            TimeSpent(startup_s=120.0, waits_s=5.0) if o.transient else TimeSpent(startup_s=30.0, measurement_s=60.0)
        )
        o.time_spent = spent.to_dict()
        return o


def test_an_anchor_launch_that_failed_transiently_counts_in_the_run_that_followed(tmp_path):
    runner = TransientThenRuns()
    study = optuna.create_study()
    again = runner_measure(runner, tmp_path, Callbacks(), study)(measured(0, 18.7, 40.0), 1)  # type: ignore[arg-type]
    assert again is not None and runner.launched == ["0000-anchor-1", "0000-anchor-1-2"]
    assert TimeSpent.from_dict(again.time_spent) == TimeSpent(startup_s=150.0, waits_s=5.0, measurement_s=60.0)
    assert accounting.never_started(study) == []  # a launch that ran carries the failed one


class NeverStarts(TransientThenRuns):
    """A trial runner whose every launch fails transiently after a long start-up."""

    def run(self, o: TrialOutcome, port: int, folder, baseline, early_stop: bool = True) -> TrialOutcome:
        self.launched.append(folder.name)
        o.transient = True
        o.time_spent = TimeSpent(startup_s=120.0, waits_s=5.0).to_dict()
        return o


def test_an_anchor_run_that_never_started_keeps_its_launches_seconds(tmp_path):
    """Its launches held the hardware though nothing was measured: the anchor's part counts them."""
    runner, study = NeverStarts(), optuna.create_study()
    assert runner_measure(runner, tmp_path, Callbacks(), study)(measured(0, 18.7, 40.0), 1) is None  # type: ignore[arg-type]
    kept = accounting.never_started(study)
    assert [(k["part"], k["trial"]) for k in kept] == [(ANCHOR, 0), (ANCHOR, 0)]
    st = StudyTime.of([], never_started=kept)
    assert st.parts[ANCHOR].launches == 2 and st.total == TimeSpent(startup_s=240.0, waits_s=10.0)
