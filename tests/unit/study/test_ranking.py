"""Ranking and Pareto, the one definition every reader of a study uses: the search's figures
select, fresh figures alone make what is reported, and the two are never averaged."""

import random

from kvtune.kinds import Direction
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.study.ranking import pareto, rank, rank_fresh
from kvtune.study.spec import StudySpec


def o(n, values, feasible=True, dup=None, confirmation=None) -> TrialOutcome:
    return TrialOutcome(
        number=n,
        candidate=Candidate(flags={"x": n}),
        argv=["srv"],
        env={},
        metrics={"v": 1.0},
        constraints={RUNS_KEY: -1.0 if feasible else 1.0},
        objective=values[0],
        objectives=list(values),
        duplicate_of=dup,
        confirmation=confirmation,
    )


def test_rank_by_direction_and_confirmation():
    outs = [
        o(0, [5.0]),
        o(1, [9.0]),
        o(2, [7.0], feasible=False),
        o(3, [8.0], dup=1),
        o(4, [6.0], confirmation={"objective": 20.0, "objectives": [20.0], "feasible": True}),
        o(5, [10.0], confirmation={"objective": 10.0, "objectives": [10.0], "feasible": False}),
    ]
    assert [x.number for x in rank(outs, Direction.MAXIMIZE, confirmed=False)] == [5, 1, 4, 0]
    # the search's figures order; 5 was shown to fail on fresh servers; nothing is averaged
    assert [x.number for x in rank(outs, Direction.MAXIMIZE)] == [1, 4, 0]
    assert [x.number for x in rank(outs, Direction.MINIMIZE)] == [0, 4, 1]
    # the re-measured ones that held, by their fresh figure alone
    assert [x.number for x in rank_fresh(outs, Direction.MAXIMIZE)] == [4]
    assert outs[4].fresh_objective == 20.0 and outs[1].fresh_objective is None


def test_pareto_over_three_objectives_with_mixed_directions_matches_brute_force():
    rnd = random.Random(7)
    dirs = [Direction.MAXIMIZE, Direction.MINIMIZE, Direction.MAXIMIZE]
    outs = [o(n, [rnd.randint(0, 5) for _ in dirs], feasible=rnd.random() > 0.2) for n in range(40)]
    sign = [1 if d is Direction.MAXIMIZE else -1 for d in dirs]

    def beats(a, b):
        pa = [s * v for s, v in zip(sign, a.objectives)]
        pb = [s * v for s, v in zip(sign, b.objectives)]
        return all(x >= y for x, y in zip(pa, pb)) and pa != pb

    ok = [x for x in outs if x.feasible]
    expected = {x.number for x in ok if not any(beats(y, x) for y in ok)}
    front = pareto(outs, dirs, values=lambda x: x.objectives)
    assert {x.number for x in front} == expected
    firsts = [x.objectives[0] for x in front]
    assert firsts == sorted(firsts, reverse=True)  # best first on the first objective


def test_pareto_leaves_out_duplicates_missing_values_and_trials_that_did_not_hold():
    outs = [
        o(0, [1.0, 1.0]),
        o(1, [9.0, 9.0], dup=0),
        o(2, [9.0, None]),
        o(3, [9.0, 0.5], confirmation={"objective": 9.0, "feasible": False}),
    ]
    search = lambda x: x.objectives  # noqa: E731
    assert [x.number for x in pareto(outs, [Direction.MAXIMIZE, Direction.MINIMIZE], values=search)] == [0]


def again(values: list[float], feasible: bool = True) -> dict:
    return {"objective": values[0], "objectives": values, "feasible": feasible, "valid_runs": 1}


def test_the_reported_pareto_set_is_built_from_fresh_re_measurements_only():
    """Issue 37: the search's first figures select what is re-measured; the set a study reports
    comes from the fresh runs alone, never averaged with the first figure (biased up for the
    configs the search put on top)."""
    dirs = [Direction.MAXIMIZE, Direction.MINIMIZE]  # throughput up, TTFT down
    outs = [
        o(0, [100.0, 300.0], confirmation=again([95.0, 280.0])),  # the defaults
        # first 200 tok/s at 900 ms: the search's best throughput; fresh only 120 at 900 ms
        o(1, [200.0, 900.0], confirmation=again([120.0, 900.0])),
        o(2, [150.0, 200.0], confirmation=again([140.0, 250.0])),
        o(3, [300.0, 100.0]),  # never re-measured: in no reported set, however good it looked
    ]
    first = {x.number for x in pareto(outs, dirs, values=lambda x: x.objectives)}
    assert first == {3}  # on the search's figures trial 3 dominates everything
    front = pareto(outs, dirs)
    assert [x.number for x in front] == [2]  # fresh: 140 at 250 ms beats 120 at 900 and 95 at 280
    # averaged with its first figure, trial 1 (160 tok/s) would have been in the set: it is not
    averaged = lambda x: [(f + g) / 2 for f, g in zip(x.objectives, x.fresh_objectives)]  # noqa: E731
    assert {x.number for x in pareto(outs[:3], dirs, values=averaged)} == {1, 2}
    outs[2].confirmation = again([140.0, 250.0], feasible=False)  # shown to fail on fresh servers
    assert [x.number for x in pareto(outs, dirs)] == [1, 0]


def test_pareto_reads_other_values_when_asked():
    outs = [o(n, [0.0]) for n in range(3)]
    points = {0: (100.0, 10.0), 1: (50.0, 5.0), 2: (200.0, 5.0)}  # (ttft, throughput)
    front = pareto(outs, [Direction.MINIMIZE, Direction.MAXIMIZE], values=lambda x: points[x.number])
    assert [x.number for x in front] == [1, 0]


def test_spec_objectives_are_typed():
    spec = StudySpec(objective=["output_throughput", "ttft_p99"]).validate()
    assert spec.objective_specs == (objective("output_throughput"), objective("ttft_p99"))
    assert spec.primary.key == "output_throughput" and spec.primary.direction is Direction.MAXIMIZE
    assert spec.objective_specs[1].key == "p99_ttft_ms"
    assert spec.objective_specs[1].direction is Direction.MINIMIZE
    single = StudySpec(objective="ttft_p50").validate()
    assert [x.key for x in single.objective_specs] == ["median_ttft_ms"]
    assert single.objective_specs == (single.primary,)
