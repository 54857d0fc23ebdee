"""The honest budget in the loop: --trials counts launched configs, pre-screen rejections and
duplicates are free (but told to Optuna), the asks cap ends an almost impossible space naming
the knob to widen, and --time-budget stops asking, counted across resumes and shared with
workers through the study (fake launcher: real processes, client and storage).

Here the tests that start processes; the accounting itself is tested in
tests/unit/tuner/fleet/test_accounting.py."""

from __future__ import annotations

import io
import subprocess
import sys

import optuna
import pytest
from rich.console import Console

from kvtune.artifacts.summary import summarize
from kvtune.cli.run_text import print_summary
from kvtune.knobs import Knob
from kvtune.study.results import StudyResults, choose_best
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner import accounting
from kvtune.tuner.assemble import prepare
from kvtune.tuner.budget import Budget
from kvtune.tuner.fleet.shared import Shared
from tests.conftest import TINY
from tests.paths import SRC

S = optuna.trial.TrialState


def _spec(**kw) -> StudySpec:
    base = dict(study="b", workload=TINY, confirm_top=0, startup_timeout_s=20, informed_start=False)
    return StudySpec(**{**base, **kw}).validate()


def test_pre_screen_rejections_and_duplicates_spend_nothing(make_tuner):
    # min-slot below the request length (20 tokens) is rejected before launch: 9 of 10 values
    launcher = FakeLauncher(
        knobs=(
            Knob("min-slot", "choices", choices=(1, 2, 3, 4, 5, 6, 7, 8, 9, 64)),
            Knob("speed", "choices", choices=(1, 2)),
        )
    )
    tuner, _ = make_tuner(_spec(trials=3), launcher)
    outcomes = tuner.run()
    launched = [o for o in outcomes if o.launched]
    free = [o for o in outcomes if not o.launched]
    assert len(launched) == 3  # the baseline and two measured configs: the whole budget
    assert free and all(o.duplicate_of is not None or o.reason.startswith("pre-screen:") for o in free)
    # every ask was told to Optuna: the sampler learns from the rejections too
    assert {t.state for t in tuner.study.trials} == {S.COMPLETE}
    r = tuner.budget_report
    assert (r["measured"], r["stopped"]) == (3, "trials")
    assert r["pre_screened"] + r["duplicates"] == len(free) and r["asked"] == len(outcomes)
    assert tuner.completed() == 3


def test_the_asks_cap_ends_an_impossible_space_naming_the_knob_to_widen(make_tuner, tmp_path):
    # every min-slot is below the request length; speed is a float range, so the space is endless
    launcher = FakeLauncher(knobs=(Knob("min-slot", "int", low=1, high=19), Knob("speed", "float", low=1.0, high=4.0)))
    tuner, _ = make_tuner(_spec(trials=5), launcher)
    outcomes = tuner.run()
    r = tuner.budget_report
    assert r["stopped"] == "asks cap" and r["asked"] == Budget(5).cap == 50
    assert r["measured"] == 1 and sum(o.launched for o in outcomes) == 1  # only the baseline ran
    assert "the space is almost all impossible" in r["message"]
    assert "widen min-slot (" in r["message"] and "speed" not in r["message"].split("widen")[1]
    # the summary says why the search stopped and what was free
    spec = tuner.spec
    p = prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"))
    payload = {"trials": [o.to_dict() for o in outcomes], "budget": r}
    summary = summarize(
        tuner.run_dir,
        StudyResults(choose_best(outcomes, spec.objective_specs), payload),
        outcomes,
        spec.objective_specs,
        p.targets,
        "127.0.0.1",
        8080,
    )
    out = io.StringIO()
    print_summary(p, summary, Console(file=out, width=400))
    text = out.getvalue()
    assert f"Stopped asking (asks cap): {r['message']}" in text
    assert f"Budget: 1 of 5 trials measured; {r['pre_screened']} pre-screen rejection(s)" in text


def test_a_finite_space_tried_in_full_stops_instead_of_asking_for_duplicates(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2)),))
    tuner, _ = make_tuner(_spec(trials=6), launcher)
    outcomes = tuner.run()
    assert len([o for o in outcomes if o.duplicate_of is None]) == 3  # baseline + 2 configs
    assert tuner.budget_report["stopped"] == "space exhausted"
    assert "measured 3 of 6 trials" in tuner.budget_report["message"]


def test_time_budget_counts_earlier_runs_of_a_resumed_study(make_tuner):
    spec = _spec(trials=1, study="tb")
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    first, _ = make_tuner(spec, launcher)
    first.run()
    clock = first.study.user_attrs[accounting.CLOCK_ATTR]
    # pretend the first run's trials took two hours
    first.study.set_user_attr(accounting.CLOCK_ATTR, {**clock, "before_s": 7200.0})
    again, _ = make_tuner(_spec(trials=3, study="tb", time_budget_s=3600), launcher)
    outcomes = again.run()
    assert len(outcomes) == 1  # no new trial was asked
    r = again.budget_report
    assert r["stopped"] == "time budget" and r["elapsed_s"] >= 7200
    assert r["message"].startswith("time budget of 1h spent after 2h")


def test_the_time_budget_keeps_the_verdicts_first_look_for_the_confirmation(make_tuner):
    """--time-budget is the whole run's: once what is left would not hold the verdict's first look
    (1 leader: 3 pairs = 6 launches at the search's mean), the search stops asking, before the
    budget is spent, and says so. The space (100 configs, every trial measured whole) outlasts an
    8 s budget on any machine, so the budget, not the trial count, ends the search."""
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=tuple(range(1, 101))),))
    spec = _spec(trials=100, study="keep", time_budget_s=8, confirm_top=1, confirm_pairs=3, screen_fraction=0)
    tuner, _ = make_tuner(spec, launcher)
    tuner.run()
    r = tuner.budget_report
    assert r["stopped"] == "time budget" and r["measured"] < 100
    assert r["confirmation_reserve_s"] > 0 and r["elapsed_s"] < 8  # stopped with time left for the verdict
    assert "keeping about" in r["message"] and "for the confirmation" in r["message"]


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_surplus_guard_counts_measured_configs_like_the_loop(make_tuner):
    """A worker's surplus check must not treat a free pre-screen rejection as a spent trial."""
    launcher = FakeLauncher(
        knobs=(Knob("min-slot", "choices", choices=(1, 64)), Knob("speed", "choices", choices=(1, 2)))
    )
    tuner, _ = make_tuner(_spec(trials=2, study="sur"), launcher)
    tuner.run_one()  # the baseline: 1 of 2 measured
    tuner.study.enqueue_trial({"min-slot": 1, "speed": 1})
    rejected = tuner.run_one()
    assert rejected.reason.startswith("pre-screen:") and tuner.completed() == 1
    trial = tuner.study.ask()  # a proposal, not queued: one measured slot is still free
    assert Shared(tuner.ctx, summarizes=False).step_back(trial) is None


def kvtune(*args, cwd):
    """The CLI of this checkout (its sources first), as a user runs it."""
    src = str(SRC)
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "KVTUNE_CACHE": str(cwd / "cache"), "COLUMNS": "400", "PYTHONPATH": src},
    )


@pytest.mark.parametrize("value,fragment", [("abc", "not a duration"), ("0", "more than zero"), ("-2h", "negative")])
def test_bad_time_budget_is_one_line_exit_2_and_creates_nothing(tmp_path, value, fragment):
    r = kvtune("run", "--runs-dir", str(tmp_path / "runs"), "--time-budget", value, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvtune: error: --time-budget") and fragment in lines[0]
    assert not (tmp_path / "runs").exists()
