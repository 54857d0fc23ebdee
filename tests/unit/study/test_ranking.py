"""Best and Pareto, the one definition every reader of a study uses."""

import random

from kvtune.kinds import Direction
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.study.outcome import RUNS_KEY, TrialOutcome
from kvtune.study.ranking import pareto, rank
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
        o(4, [6.0], confirmation={"objective": 20.0, "feasible": True}),
        o(5, [10.0], confirmation={"objective": 10.0, "feasible": False}),
    ]
    assert [x.number for x in rank(outs, Direction.MAXIMIZE, confirmed=False)] == [5, 1, 4, 0]
    assert [x.number for x in rank(outs, Direction.MAXIMIZE)] == [4, 1, 0]  # 4 averages 13; 5 fell
    assert [x.number for x in rank(outs, Direction.MINIMIZE)] == [0, 1, 4]


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
    front = pareto(outs, dirs)
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
    assert [x.number for x in pareto(outs, [Direction.MAXIMIZE, Direction.MINIMIZE])] == [0]


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
