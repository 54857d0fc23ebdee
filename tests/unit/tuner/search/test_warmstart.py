"""Warm start from another study, single- or multi-objective."""

import optuna
from optuna.distributions import CategoricalDistribution

from kvtune.jsonsafe import to_jsonable
from kvtune.knobs import Candidate, Knob
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.tuner.search.warmstart import enqueue_warm_start

KNOBS = [Knob("parallel", "choices", choices=(1, 2, 4, 8))]


def source_study(directions: list[str], rows: list[tuple[int, list[float]]]) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="src", directions=directions)
    for n, (parallel, values) in enumerate(rows):
        o = TrialOutcome(
            number=n,
            candidate=Candidate(flags={"parallel": parallel}),
            argv=["srv"],
            env={},
            metrics={"output_throughput": values[0]},
            constraints={RUNS_KEY: -1.0},
            objective=values[0],
            objectives=values,
        )
        study.add_trial(
            optuna.trial.create_trial(
                params={"parallel": parallel},
                distributions={"parallel": CategoricalDistribution((1, 2, 4, 8))},
                values=values,
                user_attrs={"outcome": to_jsonable(o)},
            )
        )
    return study


def test_warm_start_from_a_multi_objective_study_ranks_by_its_first_objective():
    # output_throughput (maximize), ttft_p95 (minimize): reading `source.direction` would raise
    src = source_study(["maximize", "minimize"], [(1, [10.0, 50.0]), (8, [40.0, 400.0]), (4, [30.0, 90.0])])
    new = optuna.create_study(directions=["maximize", "minimize"])
    labels = enqueue_warm_start(new, src, KNOBS, top=2)
    assert labels == ["src#1", "src#2"]
    asked = [new.ask() for _ in labels]  # the queued configs come out first, in order
    assert [t.suggest_categorical("parallel", (1, 2, 4, 8)) for t in asked] == [8, 4]
    assert [t.user_attrs["warm_start"] for t in asked] == labels


def test_warm_start_from_a_minimizing_study():
    src = source_study(["minimize"], [(1, [50.0]), (8, [400.0]), (4, [90.0])])
    new = optuna.create_study(direction="minimize")
    assert enqueue_warm_start(new, src, KNOBS, top=2) == ["src#0", "src#2"]


def test_warm_start_configs_that_share_compiled_graphs_are_queued_together():
    """vLLM configs whose compile-cache key is equal run one after another (one compile, then cache
    hits), the key of the trial queued before them first; the labels stay in rank order."""
    src = source_study(["maximize"], [(1, [10.0]), (8, [40.0]), (2, [30.0]), (4, [35.0])])
    new = optuna.create_study(direction="maximize")
    new.enqueue_trial({"parallel": 2}, user_attrs={"informed_start": True})  # queued before: key "small"

    def key(params):
        return "small" if params.get("parallel", 0) <= 2 else "large"

    labels = enqueue_warm_start(new, src, KNOBS, top=3, compile_key=key)
    assert labels == ["src#1", "src#3", "src#2"]  # by rank: 8, 4, 2
    asked = [new.ask() for _ in range(4)]
    order = [t.suggest_categorical("parallel", (1, 2, 4, 8)) for t in asked]
    assert order == [2, 2, 8, 4]  # the informed start, then its key's config, then the other key's two
