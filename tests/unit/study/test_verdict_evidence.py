"""The study record as the verdict's evidence (study/verdict_evidence.py): which run plays which
role, what counts as failed, the study's targets as the verdict tests them, how many flags a
config changes, and a re-measured config's fresh runs judged by the verdict's tests."""

from __future__ import annotations

import pytest

from kvtune.kinds import Direction, FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.targets import parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.verdict_evidence import (
    changed_from_defaults,
    evidence_of,
    fresh_failure,
    goal_of,
    policy_of,
    simplicity,
    stored_verdict,
)
from kvtune.verdict import OBJECTIVE, DecisionKind, Role, Verdict


def outcome(number: int, objective: float | None, baseline: bool = False, runs: list | None = None) -> TrialOutcome:
    o = TrialOutcome(
        number=number,
        candidate=Candidate(flags={} if baseline else {"parallel": number}),
        argv=["srv"],
        env={},
        baseline=baseline,
        metrics=None if objective is None else {"output_throughput": objective, "p95_tpot_ms": 30.0},
        constraints={"server_ran": -1.0} if objective is not None else {"server_ran": 1.0},
        objective=objective,
        objectives=[objective] if objective is not None else [],
    )
    if runs is not None:
        o.confirmation = {"runs": runs}
    return o


def run(role: str, objective: float, at: float, feasible: bool = True, **extra) -> dict:
    return {
        "role": role,
        "objective": objective,
        "metrics": {"output_throughput": objective},
        "feasible": feasible,
        "at": at,
        "valid": True,
        **extra,
    }


def test_search_screen_proof_and_the_end_sentinel_take_their_roles_in_time_order():
    base = outcome(0, 100.0, baseline=True, runs=[run("sentinel", 98.0, at=10.0), run("proof", 99.0, at=40.0)])
    cand = outcome(2, 120.0, runs=[run("screen", 118.0, at=20.0), run("proof", 119.0, at=30.0)])
    ev = evidence_of([base, outcome(1, 90.0), cand], defaults={})
    assert [c.number for c in ev.configs] == [0, 1, 2] and ev.baseline is not None and ev.baseline.number == 0
    assert [(r.config, r.role) for r in ev.runs] == [
        (0, Role.SEARCH),
        (1, Role.SEARCH),
        (2, Role.SEARCH),
        (0, Role.PROOF),  # the end sentinel is the first D
        (2, Role.SCREEN),
        (2, Role.PROOF),
        (0, Role.PROOF),
    ]
    assert ev.runs[3].values[OBJECTIVE] == 98.0 and ev.config(2).flags_changed == 1


def test_a_missed_target_is_not_a_failure_a_crash_is_and_a_disturbed_run_is_no_evidence():
    missed = run("proof", 80.0, at=1.0, feasible=False, failure=FailureKind.TARGET_MISSED.value)
    crashed = run("proof", None, at=2.0, feasible=False, failure="crashed", reason="server exited")  # type: ignore[arg-type]
    busy = run("proof", 50.0, at=3.0, disturbed=True)
    ev = evidence_of([outcome(0, 100.0, baseline=True), outcome(1, 90.0, runs=[missed, crashed, busy])])
    proof = ev.of(1, Role.PROOF)
    assert [r.failed for r in proof] == ["", "server exited", ""]
    assert [r.met for r in proof] == [False, False, True]
    assert [r.usable for r in proof] == [True, False, False]


def test_a_config_never_launched_is_no_config_of_the_verdict():
    rejected = outcome(3, None)
    rejected.launched = False
    dup = outcome(4, 100.0)
    dup.duplicate_of = 0
    ev = evidence_of([outcome(0, 100.0, baseline=True), rejected, dup])
    assert [c.number for c in ev.configs] == [0]


def test_goal_and_policy_from_the_study():
    goal = goal_of(
        Direction.MAXIMIZE, [parse_target("tpot_p95<0.7x"), parse_target("ttft<2s"), parse_target("error_rate<1%")]
    )
    tpot, ttft, errors = goal.targets
    assert goal.maximize and (tpot.key, tpot.factor, tpot.threshold, tpot.upper) == ("p95_tpot_ms", 0.7, None, True)
    assert (ttft.threshold, ttft.factor, ttft.log_scale) == (2000.0, None, True)
    assert not errors.log_scale  # a rate is judged on its mean, not on logs
    d = policy_of(confirm_top=3, confirm_pairs=9)
    assert (d.screen, d.cap, d.every) == (3, 9, 3)
    p = policy_of(confirm_top=1, confirm_pairs=2)
    assert (p.screen, p.cap, p.every) == (1, 2, 2)


def test_the_stored_verdict_is_read_back_from_any_record():
    v = Verdict(DecisionKind.BEATS_DEFAULTS, named=2, reason="trial 2 beats the defaults.", candidate=2, baseline=0)
    base = outcome(0, 100.0, baseline=True, runs=[])
    assert stored_verdict([base]) is None
    base.verdict = v.to_dict()
    assert stored_verdict([outcome(1, 90.0), base]) == v


def test_changed_from_defaults_counts_flags_and_environment():
    defaults = {"batch-size": 2048, "cont-batching": True, "env:OMP_NUM_THREADS": "2"}
    assert changed_from_defaults({}, {}, defaults) == 0  # the baseline
    assert changed_from_defaults({"batch-size": 2048, "threads": 2}, {}, defaults) == 1
    assert changed_from_defaults({"batch-size": 512}, {"OMP_NUM_THREADS": "2"}, defaults) == 1
    assert changed_from_defaults({"batch-size": 512}, {"OMP_NUM_THREADS": "1", "X": "y"}, defaults) == 3
    assert changed_from_defaults({"batch-size": 2048}, {"X": "y"}, None) == 2  # nothing known


def test_simplicity_counts_changes_from_defaults():
    assert simplicity({}) == 0
    assert simplicity({"threads": 2, "batch-size": 512}) == 2
    assert simplicity({"threads": 2, "batch-size": 512}, {"batch-size": "512"}) == 1
    assert simplicity({"threads": 2, "flash-attn": None}, {"threads": 4}) == 1
    assert simplicity({"cont-batching": True}, {"cont-batching": "true"}) == 0
    assert simplicity({"threads": 2}, {"threads": 2}) == 0  # a baseline has 0


MISSED = FailureKind.TARGET_MISSED.value
TTFT = goal_of(Direction.MAXIMIZE, [parse_target("ttft_p95<100ms")])


def ttft_run(ms: float, **extra) -> dict:
    """A fresh run at p95 TTFT `ms` as the runner records it against ttft_p95<100ms."""
    over = ms >= 100.0
    metrics = {"output_throughput": 50.0, "p95_ttft_ms": ms}
    return {"objective": 50.0, "metrics": metrics, "feasible": not over, "failure": MISSED if over else None, **extra}


def test_one_fresh_run_over_a_latency_bound_shows_nothing_three_consistent_ones_show_a_miss():
    """One slow run is no miss (a p95 of 16 requests is one slow request away from one): the
    verdict's test needs a spread; three runs well over the bound show it missed."""
    why, checks = fresh_failure([ttft_run(150.0)], [], TTFT)
    assert why == "" and [c.shown for c in checks] == ["unclear"]
    why, checks = fresh_failure([ttft_run(150.0), ttft_run(155.0), ttft_run(148.0)], [], TTFT)
    assert why.startswith("shown to miss on 3 fresh runs: ttft_p95<100ms: 151 ms") and checks[0].shown == "missed"
    why, checks = fresh_failure([ttft_run(50.0), ttft_run(52.0), ttft_run(51.0)], [], TTFT)
    assert why == "" and checks[0].shown == "met"


def test_a_run_that_failed_outright_fails_the_config_whatever_the_others_show():
    crashed = {"objective": None, "metrics": None, "feasible": False, "failure": "crashed", "reason": "exit 139"}
    assert fresh_failure([ttft_run(50.0), crashed], [], TTFT) == ("exit 139", ())


def test_relative_targets_are_judged_against_the_defaults_fresh_runs_and_are_certain_for_the_defaults():
    goal = goal_of(Direction.MAXIMIZE, [parse_target("ttft_p95<2x")])
    base = [ttft_run(100.0), ttft_run(102.0), ttft_run(98.0)]
    why, checks = fresh_failure([ttft_run(400.0), ttft_run(410.0)], base, goal)
    assert why.startswith("shown to miss on 2 fresh runs") and checks[0].bound == pytest.approx(200.0, rel=0.01)
    why, checks = fresh_failure([ttft_run(150.0)], base, goal)
    assert why == "" and checks[0].shown == "met"  # 1.5x, far under 2x against the defaults' 3 runs
    why, checks = fresh_failure(base, base, goal, defaults=True)
    assert why == "" and checks[0].shown == "met"  # within 2x of their own figure, by construction


def test_a_rate_target_is_judged_on_the_mean_of_the_fresh_runs():
    goal = goal_of(Direction.MAXIMIZE, [parse_target("error_rate<1%")])
    ok = {**ttft_run(50.0), "metrics": {"output_throughput": 50.0, "error_rate": 0.0}}
    bad = {**ttft_run(50.0), "metrics": {"output_throughput": 50.0, "error_rate": 0.05}, "feasible": False}
    bad["failure"] = MISSED
    assert fresh_failure([ok], [], goal)[0] == ""
    assert fresh_failure([bad], [], goal)[0].startswith("shown to miss on 1 fresh run: error_rate<1%")
