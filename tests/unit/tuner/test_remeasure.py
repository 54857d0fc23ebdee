"""One re-measurement of a measured config (tuner/remeasure.py): the run record, the aggregate of
a trial's valid runs (what naming and `kvtune show` read) and whether they held (the verdict's
tests on them), a fresh launch retried while it fails transiently (the failed launch's seconds
counted in the one that ran), every launch moving the budget's clock, and the confirmation
record kept in the study's records. A scripted runner stands in for the server: no process;
the wall times the clock is moved to are injected."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna

from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.targets import parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import CONFIRMATION, SENTINEL, StudyTime, TimeSpent
from kvtune.tuner import accounting
from kvtune.tuner.events import Callbacks
from kvtune.tuner.remeasure import (
    SEED_STEP,
    TRANSIENT_ATTEMPTS,
    Remeasurer,
    aggregate,
    run_record,
    runs_of,
)
from kvtune.workload import Workload


def outcome(n: int, value: float | None, feasible: bool = True, **fields) -> TrialOutcome:
    return TrialOutcome(
        number=n,
        candidate=Candidate({"speed": n}),
        argv=[],
        env={},
        metrics=None if value is None else {"output_throughput": value},
        constraints={"x": -1.0 if feasible else 1.0},
        objective=value,
        objectives=[value],
        **fields,
    )


def run(value: float | None, valid: bool = True, feasible: bool = True, **extra) -> dict[str, Any]:
    metrics = None if value is None else {"output_throughput": value, "p95_ttft_ms": 10.0 * (value or 1)}
    return {
        "metrics": metrics,
        "objective": value,
        "objectives": [value],
        "feasible": feasible,
        "valid": valid,
        **extra,
    }


# ---- the record -------------------------------------------------------------------------------
def test_a_run_record_keeps_the_figures_the_seed_the_role_and_its_disturbance():
    quiet = run_record(outcome(3, 12.0), seed=9, role="proof")
    assert (quiet["objective"], quiet["seed"], quiet["role"], quiet["feasible"]) == (12.0, 9, "proof", True)
    assert quiet["valid"] and not quiet["disturbed"] and quiet["interference"] is None
    busy = run_record(outcome(3, 12.0, interference={"disturbed": True}), seed=9, role="proof")
    assert busy["disturbed"] and not busy["valid"]


def test_the_aggregate_is_the_mean_of_the_valid_runs():
    a = aggregate([run(10.0, seed=1), run(30.0, valid=False), run(20.0, seed=2)])
    assert a["objective"] == 15.0 and a["objectives"] == [15.0]
    assert a["metrics"] == {"output_throughput": 15.0, "p95_ttft_ms": 150.0}
    assert a["feasible"] and a["valid_runs"] == 2 and a["seed"] == 2 and len(a["runs"]) == 3
    assert "no_valid_run" not in a


def test_a_valid_run_that_failed_outright_makes_the_record_infeasible_with_its_reason():
    a = aggregate([run(10.0), run(5.0, feasible=False, reason="requests failed")])  # no failure kind: outright
    assert not a["feasible"] and a["reason"] == "requests failed"


MISSED = FailureKind.TARGET_MISSED.value


def test_the_run_record_keeps_why_a_run_failed():
    missed = outcome(3, 12.0, feasible=False, failure=FailureKind.TARGET_MISSED, reason="tpot broke")
    assert run_record(missed, seed=9, role="proof")["failure"] == MISSED
    assert run_record(outcome(3, 12.0), seed=9, role="proof")["failure"] is None


def test_a_run_that_only_missed_a_target_is_the_judges_to_decide_on_all_the_valid_runs():
    """Whether re-measured runs still meet the targets is the verdict's tests' to say (the judge),
    on every valid run; a run that only missed a target does not decide it alone."""
    seen: list[list[float]] = []

    def judge(valid: list[dict]) -> tuple[str, tuple]:
        seen.append([r["objective"] for r in valid])
        return ("shown to miss" if len(valid) > 2 else ""), ()

    two = [run(10.0), run(20.0, feasible=False, failure=MISSED, reason="ttft broke")]
    ok = aggregate(two, judge)
    assert ok["feasible"] and ok["reason"] == "" and seen[-1] == [10.0, 20.0]
    assert aggregate(two, None)["feasible"]  # without a judge only an outright failure fails them
    slow = aggregate([*two, run(30.0, valid=False), run(20.0)], judge)
    assert not slow["feasible"] and slow["reason"] == "shown to miss" and seen[-1] == [10.0, 20.0, 20.0]


def test_a_run_that_failed_outright_decides_before_the_judge():
    crashed = run(10.0, feasible=False, failure=FailureKind.CRASHED.value, reason="crashed: exit 139")
    a = aggregate([run(10.0), crashed], lambda valid: ("", ()))
    assert not a["feasible"] and a["reason"] == "crashed: exit 139"
    no_figure = aggregate([run(None, feasible=False, failure=MISSED)], lambda valid: ("", ()))
    assert not no_figure["feasible"] and no_figure["reason"] == "no figure"


def test_with_no_valid_run_every_run_counts_and_the_record_says_so():
    a = aggregate([run(10.0, valid=False, disturbed=True), run(20.0, valid=False)])
    assert a["objective"] == 15.0 and a["valid_runs"] == 0
    assert a["no_valid_run"] and a["disturbed"]

    def judge(valid: list[dict]) -> tuple[str, tuple]:
        raise AssertionError("disturbed runs are no evidence to judge")

    assert aggregate([run(10.0, valid=False, disturbed=True)], judge)["reason"] == ""


def test_a_non_finite_metric_is_not_averaged_and_a_missing_objective_is_none():
    a = aggregate([run(10.0), {**run(20.0), "metrics": {"output_throughput": math.inf}}])
    assert a["metrics"]["output_throughput"] == math.inf  # the last run's, not a mean with inf
    failed = aggregate([run(None, feasible=False)])
    assert failed["objective"] is None and failed["metrics"] is None and not failed["feasible"]


def test_runs_of_reads_an_earlier_versions_record_as_one_run():
    assert runs_of(outcome(1, 1.0)) == []
    old = outcome(1, 1.0, confirmation={"objective": 2.0, "feasible": True})
    assert runs_of(old) == [{"objective": 2.0, "feasible": True}]
    new = outcome(1, 1.0, confirmation=aggregate([run(3.0), run(4.0)]))
    assert [r["objective"] for r in runs_of(new)] == [3.0, 4.0]


# ---- the Remeasurer on a scripted runner ------------------------------------------------------
FAILED_START = TimeSpent(startup_s=120.0, waits_s=5.0)  # a start-up that timed out, after a memory wait
RAN = TimeSpent(startup_s=30.0, measurement_s=60.0, teardown_s=2.0, cache_hit=True)


@dataclass
class ScriptedRunner:
    """Answers each run with the next scripted (objective, transient), a transient one having
    spent `FAILED_START`, any other `RAN`; records folders and seeds."""

    script: list[tuple[float | None, bool]]
    what: Any = field(
        default_factory=lambda: SimpleNamespace(
            spec=SimpleNamespace(
                workload=Workload(seed=5), primary=SimpleNamespace(name="output_throughput", direction="maximize")
            )
        )
    )
    runs: list[tuple[Path, int]] = field(default_factory=list)
    targets: list = field(default_factory=list)
    early_stops: list[bool] = field(default_factory=list)

    def new_outcome(self, number: int, candidate: Candidate, baseline: bool):
        return TrialOutcome(number=number, candidate=candidate, argv=[], env={}, baseline=baseline), 8000

    def run(
        self, o: TrialOutcome, port: int, folder: Path, baseline, workload: Workload, early_stop: bool = True
    ) -> TrialOutcome:
        value, transient = self.script[len(self.runs)]
        self.early_stops.append(early_stop)
        self.runs.append((folder, workload.seed))
        o.transient, o.objective, o.objectives = transient, value, [value]
        o.constraints = {"x": -1.0}
        o.time_spent = (FAILED_START if transient else RAN).to_dict()
        return o


@dataclass
class Records:
    confirmed: dict[int, dict] = field(default_factory=dict)
    baseline: TrialOutcome | None = None
    study: optuna.Study = field(default_factory=optuna.create_study)  # in memory: the budget's clock

    def measured_baseline(self) -> TrialOutcome | None:
        return self.baseline

    def anchor(self) -> TrialOutcome | None:  # a quiet baseline anchors itself (tuner/anchor.py)
        return self.baseline

    def confirm(self, number: int, record: dict) -> None:
        self.confirmed[number] = record


def remeasurer(script, tmp_path) -> tuple[Remeasurer, ScriptedRunner, Records, list[str]]:
    phases: list[str] = []
    runner, records = ScriptedRunner(script), Records()
    r = Remeasurer(runner, records, Callbacks(phase=lambda n, p: phases.append(p)), tmp_path)  # type: ignore[arg-type]
    return r, runner, records, phases


def test_a_re_measurement_uses_other_prompts_and_its_own_folder(tmp_path):
    r, runner, _, phases = remeasurer([(11.0, False)], tmp_path)
    again = r.launch(outcome(4, 10.0), "proving")
    assert again is not None and again.objective == 11.0
    assert runner.runs == [(tmp_path / "trials" / "0004-confirm", 5 + SEED_STEP)]
    assert r.seed() == 5 + SEED_STEP
    assert "re-measured output_throughput: 11 (first 10)" in phases
    assert runner.early_stops == [False]  # measured in full: the runs are averaged


def test_relative_targets_are_judged_against_the_defaults_fresh_runs_by_the_verdicts_test(tmp_path):
    """The defaults meet their own relative target by construction (the demo's defaults once
    "broke" their own `tpot_p95<2x` on one slow request); a config is held to 2x the defaults'
    fresh runs, and shown to miss it only by runs of its own that show a spread."""
    r, runner, records, _ = remeasurer([], tmp_path)
    runner.targets = [parse_target("ttft_p95<2x")]
    base = outcome(0, 10.0, baseline=True)
    r.add(base, run(10.0), base)  # its fresh runs: 100 ms, a disturbed 990 ms, 110 ms
    base.confirmation = records.confirmed[0]
    r.add(base, run(99.0, valid=False), base)
    base.confirmation = records.confirmed[0]
    r.add(base, run(11.0), base)
    base.confirmation = records.confirmed[0]
    assert base.confirmation["feasible"] and [t["shown"] for t in base.confirmation["targets"]] == ["met"]
    slow = outcome(2, 30.0)
    r.add(slow, run(30.0), base)  # 300 ms once: 2.9x the defaults' 105 ms, on one run: not shown
    assert records.confirmed[2]["feasible"] and records.confirmed[2]["targets"][0]["shown"] == "unclear"
    slow.confirmation = records.confirmed[2]
    r.add(slow, run(31.0), base)  # 300 and 310 ms: shown over 200 ms
    assert not records.confirmed[2]["feasible"] and "shown to miss on 2 fresh runs" in records.confirmed[2]["reason"]


def test_a_transient_failure_is_launched_again_then_given_up(tmp_path):
    r, runner, _, phases = remeasurer([(None, True), (12.0, False)], tmp_path)
    assert r.launch(outcome(4, 10.0), "proving").objective == 12.0
    assert "launching again" in " ".join(phases)
    r, runner, _, phases = remeasurer([(None, True)] * TRANSIENT_ATTEMPTS, tmp_path)
    assert r.launch(outcome(4, 10.0), "proving") is None
    assert len(runner.runs) == TRANSIENT_ATTEMPTS and "never started" in phases[-1]


def test_each_launch_of_a_re_measurement_writes_its_own_folder(tmp_path):
    """A retry does not overwrite the failed launch's server log: the reason it failed stays."""
    r, runner, _, _ = remeasurer([(None, True), (12.0, False)], tmp_path)
    r.launch(outcome(4, 10.0), "proving")
    assert [folder.name for folder, _ in runner.runs] == ["0004-confirm", "0004-confirm-retry1"]


def test_a_re_measurement_that_never_started_keeps_its_seconds_in_its_part(tmp_path):
    """Its launches held the hardware through their start-ups though nothing was measured: the
    study's hardware time counts each of them, in the part the caller names."""
    r, _, records, _ = remeasurer([(None, True)] * (2 * TRANSIENT_ATTEMPTS), tmp_path)
    assert r.launch(outcome(4, 10.0), "proving") is None
    assert r.launch(outcome(0, 10.0, baseline=True), "baseline sentinel", SENTINEL) is None
    kept = accounting.never_started(records.study)
    assert [(k["part"], k["trial"]) for k in kept] == [(CONFIRMATION, 4)] * 2 + [(SENTINEL, 0)] * 2
    st = StudyTime.of([], never_started=kept)
    assert st.parts[CONFIRMATION].launches == 2 and st.parts[SENTINEL].launches == 2 and st.never_started == 4
    assert st.total == FAILED_START + FAILED_START + FAILED_START + FAILED_START
    assert st.lines()[0].startswith("hardware time: 8m20s in 4 launches (4 never started): sentinel 4m10s")


def test_runs_are_added_to_the_record_whose_figure_is_their_mean_alone(tmp_path):
    r, _, records, _ = remeasurer([], tmp_path)
    o = outcome(2, 10.0)
    r.add(o, run(20.0), None)
    o.confirmation = records.confirmed[2]
    r.add(o, run(40.0), None)
    o.confirmation = records.confirmed[2]
    assert o.confirmation["objective"] == 30.0 and o.fresh_objective == 30.0  # the first 10 left out
    assert o.objective == 10.0  # what the search saw


def test_a_second_re_measurement_gets_a_numbered_folder(tmp_path):
    r, runner, _, _ = remeasurer([(11.0, False)], tmp_path)
    r.launch(outcome(4, 10.0, confirmation=aggregate([run(9.0)])), "proving")
    assert runner.runs[0][0] == tmp_path / "trials" / "0004-confirm-2"
    assert runner.runs[0][1] == 5 + SEED_STEP


def test_a_failed_launchs_seconds_count_in_the_start_up_and_waits_of_the_one_that_ran(tmp_path):
    r, _, _, _ = remeasurer([(None, True), (12.0, False)], tmp_path)
    again = r.launch(outcome(4, 10.0), "proving")
    assert again is not None
    assert TimeSpent.from_dict(again.time_spent) == TimeSpent(
        startup_s=150.0, waits_s=5.0, measurement_s=60.0, teardown_s=2.0, cache_hit=True
    )
    assert run_record(again, 1, "proof")["time_spent"]["total_s"] == 217.0  # what the study's time lines count
    r, _, _, _ = remeasurer([(12.0, False)], tmp_path)
    assert TimeSpent.from_dict(r.launch(outcome(4, 10.0), "proving").time_spent) == RAN  # nothing failed: its own


def test_every_launch_moves_the_budgets_clock_so_a_resumed_study_counts_it(tmp_path):
    """A sentinel or the confirmation after the search's last trial: a resume counts their time
    against --time-budget (the clock ends at the last launch, not at the last trial)."""
    r, _, records, _ = remeasurer([(None, True), (12.0, False), (None, True), (None, True)], tmp_path)
    study = records.study
    accounting.begin_clock(study, now=1000.0)
    accounting.tick_clock(study, now=1100.0)  # the search's last trial ended here
    walls = iter([1200.0, 1400.0, 1500.0, 1600.0])
    r.wall = lambda: next(walls)
    assert r.launch(outcome(4, 10.0), "proving") is not None  # a failed launch, then one that ran
    assert study.user_attrs[accounting.CLOCK_ATTR]["last"] == 1400.0
    assert r.launch(outcome(5, 10.0), "proving") is None  # never started: its time was spent all the same
    accounting.begin_clock(study, now=9000.0)  # resumed later: the idle gap is not counted
    assert accounting.elapsed_s(study, now=9000.0) == 600.0
