"""The record store: stored trials decoded once, appended to, refreshed by number."""

import optuna

from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.tuner.records import TrialRecords


def outcome(number: int, speed: int | None, **kw) -> TrialOutcome:
    flags = {} if speed is None else {"speed": speed}
    return TrialOutcome(
        number=number,
        candidate=Candidate(flags=flags),
        argv=["srv"],
        env={},
        baseline=speed is None,
        metrics={"output_throughput": 10.0 * (speed or 1)},
        constraints={RUNS_KEY: -1.0},
        objective=10.0 * (speed or 1),
        **kw,
    )


def tell(study: optuna.Study, o: TrialOutcome) -> dict:
    stored = to_jsonable(o)
    study.add_trial(optuna.trial.create_trial(value=o.objective or 0.0, user_attrs={"outcome": stored}))
    return stored


def new_study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize")


def test_a_stored_trial_is_decoded_once_and_kept():
    study = new_study()
    tell(study, outcome(0, None))
    records = TrialRecords(study)
    first = records.outcomes()[0]
    records.refresh()
    assert records.outcomes()[0] is first  # the same record: not rebuilt from storage again


def test_refresh_reads_the_trials_other_workers_told():
    study = new_study()
    tell(study, outcome(0, None))
    records = TrialRecords(study)
    tell(study, outcome(1, 2))  # told by another worker, through the storage
    assert [o.number for o in records.outcomes()] == [0]
    records.refresh()
    assert [o.number for o in records.outcomes()] == [0, 1]
    assert records.outcomes()[1].candidate == Candidate(flags={"speed": 2})


def test_an_added_trial_reads_like_a_refreshed_one():
    study = new_study()
    mine = outcome(0, 4, failure=FailureKind.TARGET_MISSED, reason="missed")
    added = TrialRecords(study).add(tell(study, mine))
    read = TrialRecords(study).outcomes()[0]
    assert added.to_dict() == read.to_dict()
    assert added.failure is FailureKind.TARGET_MISSED


def test_confirmations_are_stored_in_the_study_and_attached():
    study = new_study()
    tell(study, outcome(0, None))
    tell(study, outcome(1, 2))
    records = TrialRecords(study)
    record = {"metrics": {"output_throughput": 19.0}, "objective": 19.0, "feasible": True, "reason": ""}
    records.confirm(1, record)
    assert records.outcomes()[1].confirmation == record and records.outcomes()[0].confirmation is None
    assert study.user_attrs["confirmations"] == {"1": record}
    assert TrialRecords(study).outcomes()[1].confirmation == record  # a resumed study sees it


def test_find_measured_skips_the_baseline_copies_and_transient_failures():
    study = new_study()
    records = TrialRecords(study)
    records.add(tell(study, outcome(0, None)))
    records.add(tell(study, outcome(1, 2, transient=True)))
    records.add(tell(study, outcome(2, 2, duplicate_of=1)))
    assert records.find_measured(Candidate()) is None  # the baseline is measured in full each time
    assert records.find_measured(Candidate(flags={"speed": 2})) is None
    records.add(tell(study, outcome(3, 2)))
    assert records.find_measured(Candidate(flags={"speed": 2})).number == 3
    assert records.measured_baseline().number == 0
