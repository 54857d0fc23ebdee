"""A worker whose trial was taken over meanwhile (another worker's recovery found its heartbeat
silent for a grace period, failed it and re-queued its config) leaves it: one line, no second
tell, no crash, and the loop goes on. SQLite in the test's folder; no process is started (the
trial is a duplicate of a measured config, told without a launch, on a port nothing binds)."""

from __future__ import annotations

from functools import partial

import optuna

from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import open_tuner, prepare
from kvtune.tuner.events import Callbacks
from kvtune.tuner.fleet.setup import set_up_study
from kvtune.tuner.fleet.shared import Shared
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.tuner.store.storage import sqlite_url
from tests.conftest import TINY

PORT = 18434  # never bound: no server starts here
State = optuna.trial.TrialState
EXTRA_WORKER = partial(Shared, summarizes=False)  # a worker that shares the study and leaves when it is done


def _worker(tmp_path, phases: list[str], on_start):
    """A worker of a set-up study whose one config (speed 2.0) is measured already: its next
    trial is a duplicate. `on_start(number)` runs when that trial starts (another worker acts)."""
    spec = StudySpec(study="taken", trials=20, workload=TINY, startup_timeout_s=20).validate()
    prep = prepare(spec, launcher=FakeLauncher(model_path="/models/m.gguf"), runs_dir=str(tmp_path / "runs"))
    url = sqlite_url(tmp_path)
    set_up_study(prep, url)
    callbacks = Callbacks(trial_started=lambda n, c, b: on_start(n), phase=lambda n, p: phases.append(p))
    worker = open_tuner(prep, callbacks, storage_url=url, coordinate=EXTRA_WORKER, ports=lambda host: PORT)
    worker.study.tell(worker.study.ask(), 1.0)  # the queued baseline, told elsewhere
    measured = TrialOutcome(
        1, Candidate(flags={"speed": 2.0}), argv=["fake"], env={}, launched=True, metrics={"ttft_p50_ms": 250.0}
    )
    worker.study.add_trial(
        optuna.trial.create_trial(
            params={"speed": 2.0},
            distributions={"speed": optuna.distributions.FloatDistribution(2.0, 2.0)},
            value=1.0,
            user_attrs={"outcome": to_jsonable(measured)},
        )
    )
    worker.space = SearchSpace([Knob("speed", KnobKind.FLOAT, low=2.0, high=2.0)], worker.launcher)
    return worker, optuna.load_study(study_name="taken", storage=url)  # the other worker's handle


def test_a_trial_taken_over_while_it_ran_is_left_without_a_second_tell(tmp_path):
    phases: list[str] = []
    other: list[optuna.Study] = []

    def taken_over(number: int) -> None:  # the other worker's recovery: failed, re-queued
        study = other[0]
        study.tell(number, state=State.FAIL)
        study.enqueue_trial({"speed": 2.0}, user_attrs={"retry_of": number})

    worker, handle = _worker(tmp_path, phases, taken_over)
    other.append(handle)
    assert worker.run_one() is None  # stepped back, as from a trial another worker took
    trial = worker.study.trials[2]
    assert trial.state == State.FAIL and "outcome" not in trial.user_attrs  # told once, by its taker
    assert [t.state for t in worker.study.trials] == [State.COMPLETE, State.COMPLETE, State.FAIL, State.WAITING]
    said = [p for p in phases if "taken over" in p]
    assert len(said) == 1 and "trial 2 was taken over (FAIL in the study" in said[0]
    assert worker.records.find_measured(Candidate(flags={"speed": 2.0})) is not None  # its records go on


def test_the_loop_goes_on_after_a_trial_was_taken_over(tmp_path):
    """The re-queued config is run next (here a duplicate again, told at once): nothing lost."""
    phases: list[str] = []
    other: list[optuna.Study] = []
    first = [True]

    def taken_once(number: int) -> None:
        if first[0]:
            first[0] = False
            other[0].tell(number, state=State.FAIL)
            other[0].enqueue_trial({"speed": 2.0}, user_attrs={"retry_of": number})

    worker, handle = _worker(tmp_path, phases, taken_once)
    other.append(handle)
    assert worker.run_one() is None
    outcome = worker.run_one()  # the re-queued trial: this worker's now
    assert outcome is not None and outcome.duplicate_of == 1
    states = [t.state for t in worker.study.trials]
    assert states == [State.COMPLETE, State.COMPLETE, State.FAIL, State.COMPLETE]
    assert worker.study.trials[3].user_attrs["retry_of"] == 2
