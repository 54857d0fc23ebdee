"""Parameter importance is computed by the tuner from its own study, and only with enough trials."""

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution

from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.tuner.search.importance import MIN_TRIALS, ImportanceSchedule, param_importance

DISTS = {"speed": FloatDistribution(1.0, 8.0), "color": CategoricalDistribution(("red", "blue"))}


def study_of(rows: list[tuple[float, str, bool, int | None]]) -> optuna.Study:
    """A study whose trials carry outcomes as the tuner writes them: (speed, color, feasible,
    duplicate_of); the objective is 10 x speed, the color is noise."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    baseline = TrialOutcome(
        number=0,
        candidate=Candidate(),
        argv=["srv"],
        env={},
        baseline=True,
        metrics={"output_throughput": 5.0},
        constraints={RUNS_KEY: -1.0},
        objective=5.0,
    )
    study.add_trial(optuna.trial.create_trial(value=5.0, user_attrs={"outcome": to_jsonable(baseline)}))
    for n, (speed, color, feasible, dup) in enumerate(rows, start=1):
        value = 10 * speed + (0.1 if color == "red" else 0.0)
        o = TrialOutcome(
            number=n,
            candidate=Candidate(flags={"speed": speed, "color": color}),
            argv=["srv"],
            env={},
            metrics={"output_throughput": value},
            objective=value,
            duplicate_of=dup,
            constraints={"ttft_p95<1000ms": -0.5 if feasible else 0.5, RUNS_KEY: -1.0},
            failure=None if feasible else FailureKind.TARGET_MISSED,
        )
        study.add_trial(
            optuna.trial.create_trial(
                params={"speed": speed, "color": color},
                distributions=DISTS,
                value=value,
                user_attrs={"outcome": to_jsonable(o)},
            )
        )
    return study


def test_importance_names_the_flag_that_moves_the_objective():
    rows = [(1.0 + i * 0.8, "red" if i % 2 else "blue", True, None) for i in range(MIN_TRIALS + 1)]
    imp = param_importance(study_of(rows))
    assert imp.skipped == "" and set(imp.values) == {"speed", "color"}
    assert imp.values["speed"] > imp.values["color"]
    assert imp.to_dict() == imp.values


def test_too_few_measured_feasible_trials_is_skipped_with_the_reason():
    rows = [(1.0 + i, "red" if i % 2 else "blue", True, None) for i in range(MIN_TRIALS - 1)]
    rows += [(2.5, "red", False, None), (3.5, "blue", True, 1)]  # infeasible, and a duplicate
    imp = param_importance(study_of(rows))
    assert imp.values is None
    assert f"at least {MIN_TRIALS} measured feasible" in imp.skipped and f"has {MIN_TRIALS - 1}" in imp.skipped
    assert imp.to_dict() == {"skipped": imp.skipped}


def _outcomes(study: optuna.Study) -> list[TrialOutcome]:
    return [TrialOutcome.from_dict(t.user_attrs["outcome"]) for t in study.trials]


def test_the_schedule_refits_every_few_measured_trials_and_at_the_end():
    rows = [(1.0 + i * 0.8, "red" if i % 2 else "blue", True, None) for i in range(MIN_TRIALS)]
    study = study_of(rows)
    schedule = ImportanceSchedule(every=3)
    first = schedule.current(study, _outcomes(study))
    assert first.values is not None and schedule.fits == 1
    for i in range(2):  # two more measured trials: not yet worth a refit
        value = 50.0 + i
        o = TrialOutcome(
            number=len(study.trials),
            candidate=Candidate(flags={"speed": 5.0 + i, "color": "red"}),
            argv=["srv"],
            env={},
            metrics={"output_throughput": value},
            objective=value,
            constraints={RUNS_KEY: -1.0},
        )
        study.add_trial(
            optuna.trial.create_trial(
                params={"speed": 5.0 + i, "color": "red"},
                distributions=DISTS,
                value=value,
                user_attrs={"outcome": to_jsonable(o)},
            )
        )
        assert schedule.current(study, _outcomes(study)) is first and schedule.fits == 1
    final = schedule.current(study, _outcomes(study), final=True)
    assert schedule.fits == 2 and final is not first and set(final.values) == {"speed", "color"}


def test_a_skipped_importance_is_always_current():
    rows = [(1.0 + i, "red" if i % 2 else "blue", True, None) for i in range(MIN_TRIALS - 2)]
    study = study_of(rows)
    schedule = ImportanceSchedule(every=100)
    assert f"has {MIN_TRIALS - 2}" in schedule.current(study, _outcomes(study)).skipped
    study.add_trial(
        optuna.trial.create_trial(
            params={"speed": 7.5, "color": "red"},
            distributions=DISTS,
            value=75.0,
            user_attrs={
                "outcome": to_jsonable(
                    TrialOutcome(
                        number=len(study.trials),
                        candidate=Candidate(flags={"speed": 7.5, "color": "red"}),
                        argv=["srv"],
                        env={},
                        metrics={"output_throughput": 75.0},
                        objective=75.0,
                        constraints={RUNS_KEY: -1.0},
                    )
                )
            },
        )
    )
    assert f"has {MIN_TRIALS - 1}" in schedule.current(study, _outcomes(study)).skipped
    assert schedule.fits == 0
