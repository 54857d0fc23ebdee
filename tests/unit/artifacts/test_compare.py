"""Studies side by side: the rows (best and defaults of each), the best overall named only by the
verdict's two-sample test on fresh runs (or none, with both intervals), the refusals of studies
that measured different things, compare.json (the page: test_compare_report.py)."""

from __future__ import annotations

import json

import pytest

from kvtune.artifacts.side_by_side import check_comparable, compare_studies, load_comparison, write_comparison
from kvtune.errors import SpecError
from kvtune.jsonsafe import dumps
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import build_payload
from kvtune.study.spec import StudySpec, parse_objectives
from kvtune.verdict import DecisionKind, Verdict

TARGETS = ["ttft p95 < 2 s", "error rate < 1%"]


def outcome(
    n: int, tput: float, ttft: float, feasible: bool = True, flags: dict | None = None, fresh: list | None = None
) -> TrialOutcome:
    """Trial `n` (0: the defaults) measured once in the search at `tput`; `fresh`: the objective on
    the fresh runs its study's verdict judged it on (its proof runs)."""
    metrics = {"output_throughput": tput, "p95_ttft_ms": ttft, "p95_tpot_ms": 10.0 + n}
    o = TrialOutcome(
        number=n,
        candidate=Candidate(flags or {}),
        argv=["server", f"--trial={n}"],
        env={},
        baseline=n == 0,
        launched=True,
        metrics=metrics,
        constraints={"server_ran": 0.0, "ttft_p95<2s": -1.0 if feasible else 1.0},
        failure=None if feasible else FailureKind.TARGET_MISSED,
        reason="" if feasible else "missed ttft",
        objective=tput,
    )
    if fresh:
        runs = [
            {"role": "proof", "objective": v, "metrics": {**metrics, "output_throughput": v}, "feasible": True, "at": i}
            for i, v in enumerate(fresh)
        ]
        mean = sum(fresh) / len(fresh)
        o.confirmation = {
            "runs": runs,
            "metrics": {**metrics, "output_throughput": mean},
            "objective": mean,
            "objectives": [mean],
            "feasible": True,
            "valid_runs": len(fresh),
        }
    return o


def decided(outs: list[TrialOutcome], named: int) -> list[TrialOutcome]:
    """The study's verdict named trial `named` against the defaults (trial 0)."""
    kind = DecisionKind.BEATS_DEFAULTS if named else DecisionKind.TIED
    v = Verdict(kind, named=named, reason=f"trial {named} was named.", candidate=named or 1, baseline=0).to_dict()
    for o in outs:
        if o.number in (named, 0, 1):
            o.verdict = v
    return outs


def results(
    study: str,
    backend: str,
    outs: list[TrialOutcome],
    objective: str = "output_throughput",
    targets: list[str] = TARGETS,
    **workload,
) -> dict:
    spec = StudySpec(study=study, backend=backend, objective=objective).to_dict()
    spec["workload"].update(workload)
    payload = build_payload(study, spec, {}, f"{backend} 1.0", targets, parse_objectives(objective), outs)
    payload["budget"] = {"measured": len(outs), "elapsed_s": 90.0}
    payload["best_argv"] = ["server", "--deployed"]
    return json.loads(dumps(payload))


LLAMA = results(
    "S-llama-server",
    "llama-server",
    decided(
        [
            outcome(0, 80, 300, fresh=[79, 80, 81]),
            outcome(1, 120, 400, flags={"parallel": 4}, fresh=[119, 120, 121]),
            outcome(2, 200, 3000, feasible=False),
        ],
        named=1,
    ),
)
VLLM = results(
    "S-vllm",
    "vllm",
    decided(
        [
            outcome(0, 150, 200, fresh=[149, 150, 151]),
            outcome(1, 170, 250, flags={"max-num-seqs": 8}, fresh=[169, 170, 171]),
        ],
        named=1,
    ),
)


def test_two_rows_per_study_best_then_defaults():
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)])
    rows = [
        (r["label"], r["role"], r["trial"], r["output_throughput"], r["p95_ttft_ms"], r["feasible"]) for r in c.rows()
    ]
    assert rows == [
        ("llama-server", "best", 1, 120, 400, True),
        ("llama-server", "defaults", 0, 80, 300, True),
        ("vllm", "best", 1, 170, 250, True),
        ("vllm", "defaults", 0, 150, 200, True),
    ]
    assert {r["trials"] for r in c.rows()} == {3, 2}
    assert {r["wall_s"] for r in c.rows()} == {90.0}


def test_a_clear_difference_on_fresh_runs_is_named_through_the_verdicts_test():
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)])
    assert c.winner.backend == "vllm" and c.winner.best.number == 1
    assert c.why.startswith("better on fresh servers on output_throughput (vllm over llama-server +41.7% [")
    assert "96% interval), the verdict's two-sample t on fresh runs" in c.why
    assert "vllm's best, trial 1: 170 [" in c.why and "3 fresh runs" in c.why
    assert [r["winner"] for r in c.rows()] == [False, False, True, False]
    # llama-server's infeasible 200 tok/s trial does not count, nor any search figure
    assert [s.fresh for s in c.sides] == [[119, 120, 121], [169, 170, 171]]
    assert c.to_dict()["best"] == {
        "study": "S-vllm",
        "backend": "vllm",
        "trial": 1,
        "argv": ["server", "--deployed"],
        "why": c.why,
    }


def test_overlapping_intervals_name_no_winner_and_show_both():
    # the search put vllm's best at 200 tok/s (biased up); on fresh runs it is within the noise
    close = results(
        "S-vllm",
        "vllm",
        decided([outcome(0, 100, 200, fresh=[99, 100]), outcome(1, 200, 250, fresh=[112, 131, 122])], named=1),
    )
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", close)])
    assert c.winner is None and not any(r["winner"] for r in c.rows())
    assert c.why.startswith("no winner: the intervals overlap on output_throughput (vllm over llama-server")
    assert (
        "llama-server's best, trial 1: 120 [" in c.why and "vllm's best, trial 1: 121.4 [" in c.why
    )  # geometric means
    assert c.to_dict()["best"] == {"study": None, "why": c.why}


def test_a_best_without_fresh_runs_was_not_measured_the_same_way():
    # --confirm-top 0: the best is the search's top, measured once; no test can compare it
    once = results("S-vllm", "vllm", [outcome(0, 150, 200), outcome(1, 500, 250, flags={"max-num-seqs": 8})])
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", once)])
    assert c.winner is None
    assert c.why.startswith("no winner: not measured the same way (vllm's best, trial 1, has no fresh runs")
    assert "vllm's best, trial 1: no fresh runs (not confirmed: its search measurement only)" in c.why


def test_no_config_to_deploy_anywhere():
    bad = [outcome(0, 10, 5000, feasible=False)]
    c = compare_studies([("a", results("a", "llama-server", bad)), ("b", results("b", "vllm", bad))])
    assert c.winner is None and c.why == "no winner: no study has a config to deploy (nothing met the targets)"
    assert [r["trial"] for r in c.rows() if r["role"] == "best"] == [None, None]


def test_the_only_study_with_a_config_to_deploy_is_the_best_overall():
    bad = results("S-vllm", "vllm", [outcome(0, 10, 5000, feasible=False)])
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", bad)])
    assert c.winner.backend == "llama-server" and c.why == "the only one with a config to deploy (vllm: none)"


def test_studies_just_run_are_compared_from_memory():
    """A run with several backends hands its studies' trials over instead of reading them back."""
    held = [outcome(0, 150, 200, fresh=[149, 150, 151]), outcome(1, 170, 250, fresh=[169, 170, 171])]
    held = decided(held, named=1)
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)], outcomes_of={"S-vllm": held})
    assert c.sides[1].outcomes is held and c.sides[1].best is held[1]


def test_same_backend_twice_is_labelled_by_study():
    c = compare_studies([("S-llama-server", LLAMA), ("other", results("other", "llama-server", [outcome(0, 90, 300)]))])
    assert [s.label for s in c.sides] == ["S-llama-server", "other"]


@pytest.mark.parametrize(
    "other,fragment",
    [
        (results("x", "vllm", [outcome(0, 1, 1)], concurrency=4), "workload concurrency 8 vs 4"),
        (results("x", "vllm", [outcome(0, 1, 1)], targets=["ttft p95 < 1 s", "error rate < 1%"]), "targets"),
        (results("x", "vllm", [outcome(0, 1, 1)], objective="ttft_p95"), "objective output_throughput vs ttft_p95"),
    ],
)
def test_studies_that_measured_different_things_are_refused(other, fragment):
    with pytest.raises(SpecError, match=fragment) as e:
        compare_studies([("S-llama-server", LLAMA), ("x", other)])
    assert "'S-llama-server' and 'x' did not measure the same thing" in str(e.value)
    assert "\n" not in str(e.value)


def test_one_study_or_the_same_one_twice_is_refused():
    with pytest.raises(SpecError, match="compare needs two studies or more, got 1"):
        check_comparable([("a", LLAMA)])
    with pytest.raises(SpecError, match="'a' is given twice"):
        check_comparable([("a", LLAMA), ("a", LLAMA)])
    check_comparable([("a", LLAMA)], at_least=1)  # a multi-backend run where one backend could serve


def test_compare_json_round_trips_through_the_run_directories(tmp_path):
    for name, r in (("S-llama-server", LLAMA), ("S-vllm", VLLM)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(r))
    c = compare_studies(
        [("S-llama-server", LLAMA), ("S-vllm", VLLM)],
        name="S",
        skipped=[{"backend": "x", "reason": "why"}],
        wall_s={"S-vllm": 12.0},
    )
    path = write_comparison(tmp_path / "S" / "compare.json", c)
    again = load_comparison(path)
    assert again.to_dict() == c.to_dict()
    (tmp_path / "S-vllm" / "results.json").unlink()
    with pytest.raises(SpecError, match="names study 'S-vllm'"):
        load_comparison(path)


def test_relative_targets_across_backends_are_refused():
    rel = ["ttft_p95<1.5x"]
    a = results("a", "llama-server", [outcome(0, 80, 300)])
    b = results("b", "vllm", [outcome(0, 150, 200)])
    a["spec"]["targets"] = b["spec"]["targets"] = rel
    with pytest.raises(SpecError, match="relative to each study's own defaults"):
        compare_studies([("a", a), ("b", b)])
    c = results("c", "llama-server", [outcome(0, 90, 300)])
    c["spec"]["targets"] = rel
    assert [s.study for s in compare_studies([("a", a), ("c", c)]).sides] == ["a", "c"]  # one backend: the same bar
