"""The study record as the verdict's evidence (study/verdict_evidence.py): which run plays which
role, what counts as failed, and the study's targets as the verdict tests them."""

from __future__ import annotations

from kvtune.kinds import Direction, FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.targets import parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.verdict_evidence import evidence_of, goal_of, policy_of, stored_verdict
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
