"""The honest budget in the loop: --trials counts launched configs, pre-screen rejections and
duplicates are free (but told to Optuna), the asks cap ends an almost impossible space naming
the knob to widen, and --time-budget stops asking, counted across resumes and shared with
workers through the study (fake launcher: real processes, client and storage).

The tests here start no process; those that do are in tests/integration/tuner/test_budget_loop.py."""

from __future__ import annotations

import optuna

from kvtune.study.spec import StudySpec
from kvtune.tuner.fleet import accounting
from kvtune.tuner.fleet.budget import Budget
from tests.conftest import TINY

S = optuna.trial.TrialState


def _spec(**kw) -> StudySpec:
    base = dict(study="b", workload=TINY, confirm_top=0, startup_timeout_s=20, informed_start=False)
    return StudySpec(**{**base, **kw}).validate()


def test_workers_read_the_budget_the_study_stores(make_tuner):
    tuner, _ = make_tuner(_spec(trials=2, study="w"))
    accounting.store_budget(tuner.study, Budget(7, 60.0))
    assert accounting.load_budget(tuner.study, Budget(2)) == Budget(7, 60.0)
    fresh = optuna.create_study()
    assert accounting.load_budget(fresh, Budget(2)) == Budget(2)


def test_the_clock_adds_each_session_up_to_its_last_trial():
    study = optuna.create_study()
    assert accounting.elapsed_s(study, now=100.0) == 0.0
    accounting.begin_clock(study, now=1000.0)
    accounting.tick_clock(study, now=1300.0)  # the last trial of run 1 ended here
    assert accounting.elapsed_s(study, now=1400.0) == 400.0
    accounting.begin_clock(study, now=5000.0)  # resumed later: the idle gap is not counted
    assert accounting.elapsed_s(study, now=5010.0) == 310.0
    accounting.begin_clock(study, now=5020.0)  # no trial in between: nothing added
    assert accounting.elapsed_s(study, now=5020.0) == 300.0
