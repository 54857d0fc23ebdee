"""What a study's budget has spent (tuner/accounting.py), read from an in-memory Optuna
study: launched configs count, pre-screen rejections and duplicates are free, the budget and the
clock live in the study's user attrs (moved here from tests/unit/tuner/test_budget_loop.py), the
knobs behind pre-screen rejections are named, and the stop says why. Times are injected."""

from __future__ import annotations

import optuna
import pytest

from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.study.outcome import TrialOutcome
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner import accounting
from kvtune.tuner.accounting import EXHAUSTED, Spent, blame, kind_of, report, spent, stop_message
from kvtune.tuner.budget import Budget, StopReason
from kvtune.workload import Workload

S = optuna.trial.TrialState


def told(study: optuna.Study, outcome: dict | None) -> None:
    attrs = {} if outcome is None else {"outcome": outcome}
    study.add_trial(optuna.trial.create_trial(state=S.COMPLETE, value=1.0, user_attrs=attrs))


def quiet_study() -> optuna.Study:
    return optuna.create_study()  # in memory


def test_workers_read_the_budget_the_study_stores():
    study = quiet_study()
    accounting.store_budget(study, Budget(7, 60.0))
    assert accounting.load_budget(study, Budget(2)) == Budget(7, 60.0)
    assert accounting.load_budget(quiet_study(), Budget(2)) == Budget(2)


def test_the_clock_adds_each_session_up_to_its_last_trial():
    study = quiet_study()
    assert accounting.elapsed_s(study, now=100.0) == 0.0
    accounting.tick_clock(study, now=50.0)  # no session yet: nothing to move
    assert accounting.elapsed_s(study, now=100.0) == 0.0
    accounting.begin_clock(study, now=1000.0)
    accounting.tick_clock(study, now=1300.0)  # the last trial of run 1 ended here
    accounting.tick_clock(study, now=1200.0)  # a worker's clock behind: the last never goes back
    assert accounting.elapsed_s(study, now=1400.0) == 400.0
    accounting.begin_clock(study, now=5000.0)  # resumed later: the idle gap is not counted
    assert accounting.elapsed_s(study, now=5010.0) == 310.0
    accounting.begin_clock(study, now=5020.0)  # no trial in between: nothing added
    assert accounting.elapsed_s(study, now=5020.0) == 300.0


def test_a_trial_is_measured_pre_screened_or_a_duplicate_by_its_outcome():
    study = quiet_study()
    told(study, {"failure": None})
    told(study, {"failure": FailureKind.CRASHED.value})  # launched: it spent the budget
    told(study, {"failure": FailureKind.PRE_SCREEN.value})
    told(study, {"failure": None, "duplicate_of": 0})
    told(study, None)  # told by hand: it may have cost anything
    assert [kind_of(t) for t in study.trials] == ["measured", "measured", "pre-screen", "duplicate", "measured"]


def test_spent_counts_the_told_the_running_and_the_waiting():
    study = quiet_study()
    told(study, {"failure": None})
    told(study, {"failure": FailureKind.PRE_SCREEN.value})
    told(study, {"duplicate_of": 0})
    study.add_trial(optuna.trial.create_trial(state=S.FAIL))  # failed: re-queued, not spent
    study.enqueue_trial({})
    study.enqueue_trial({})
    study.ask()  # takes one of the queued: running
    used = spent(study)
    assert used == Spent(measured=1, pre_screened=1, duplicates=1, running=1, waiting=1)
    assert used.asked == 4


def rejected(n: int, flags: dict, env: dict | None = None, duplicate_of: int | None = None) -> TrialOutcome:
    return TrialOutcome(
        number=n,
        candidate=Candidate(flags, env or {}),
        argv=[],
        env={},
        failure=FailureKind.PRE_SCREEN,
        reason="too small",
        duplicate_of=duplicate_of,
    )


def test_blame_names_the_knobs_whose_default_would_have_let_a_rejection_through():
    w = Workload(prompt_tokens=100, output_tokens=28)  # 128 tokens a request
    outcomes = [
        rejected(1, {"min-slot": 64, "speed": 2}),
        rejected(2, {"min-slot": 32}, env={"X": "1"}),
        rejected(3, {"min-slot": 16}, duplicate_of=1),  # a duplicate: counted once, by its original
        TrialOutcome(number=4, candidate=Candidate({"min-slot": 8}), argv=[], env={}),  # not rejected
    ]
    assert blame(outcomes, FakeLauncher(), w) == [("min-slot", 2)]
    # an environment knob is named with its prefix when removing it lets the config through
    assert blame([rejected(5, {}, env={"X": "1"})], EnvRefusingLauncher(), w) == [("env:X", 1)]


class EnvRefusingLauncher(FakeLauncher):
    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        return "X is refused" if "X" in candidate.env else None


def test_the_stop_message_says_why_and_what_to_widen():
    budget = Budget(5)
    used = Spent(measured=2, pre_screened=48)
    text = stop_message(StopReason.ASKS, budget, used, 60.0, [("min-slot", 40), ("ctx", 8), ("speed", 1)])
    assert text.startswith("asked 50 configs")
    assert text.endswith("; widen min-slot (40 of 48), ctx (8 of 48): the pre-screen rejected configs for them")
    unnamed = stop_message("asks cap", budget, used, 60.0)
    assert unnamed.endswith("; the pre-screen rejected 48: see their reasons with kvtune show")
    assert stop_message(StopReason.TRIALS, budget, Spent(measured=5), 60.0) == "measured 5 of 5 trials"
    assert stop_message(EXHAUSTED, budget, Spent(measured=3), 60.0).startswith("the search space is exhausted")
    with pytest.raises(ValueError):
        stop_message("bored", budget, used, 60.0)


def test_the_report_is_results_jsons_budget_block():
    used = Spent(measured=3, pre_screened=2, duplicates=1, running=1)
    out = report(StopReason.TIME, Budget(10, 3600.0), used, 3725.26, message="time budget of 1h spent")
    assert out == {
        "trials": 10,
        "measured": 3,
        "pre_screened": 2,
        "duplicates": 1,
        "asked": 7,
        "asks_cap": Budget(10).cap,
        "time_budget_s": 3600.0,
        "elapsed_s": 3725.3,
        "elapsed": "1h2m5s",
        "confirmation_reserve_s": 0.0,
        "stopped": "time budget",
        "message": "time budget of 1h spent",
    }
    assert report(None, Budget(1), Spent(), 0.0)["stopped"] is None
