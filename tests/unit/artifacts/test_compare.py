"""Studies side by side: the rows (best and defaults of each), the best overall named on
evidence, the refusals of studies that measured different things, compare.json (the page:
test_compare_report.py)."""

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

TARGETS = ["ttft p95 < 2 s", "error rate < 1%"]


def outcome(
    n: int, tput: float, ttft: float, feasible: bool = True, flags: dict | None = None, again: float | None = None
) -> TrialOutcome:
    metrics = {"output_throughput": tput, "p95_ttft_ms": ttft, "p95_tpot_ms": 10.0 + n}
    return TrialOutcome(
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
        confirmation=None
        if again is None
        else {"metrics": {**metrics, "output_throughput": again}, "objective": again, "feasible": True},
    )


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
    [outcome(0, 80, 300), outcome(1, 120, 400, flags={"parallel": 4}), outcome(2, 200, 3000, feasible=False)],
)
VLLM = results("S-vllm", "vllm", [outcome(0, 150, 200), outcome(1, 170, 250, flags={"max-num-seqs": 8})])


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


def test_best_overall_on_the_primary_objective_feasible_first():
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", VLLM)])
    assert c.winner.backend == "vllm" and c.winner.best.number == 1
    assert "better by more than the noise on output_throughput" in c.why  # 170 vs 120
    assert [r["winner"] for r in c.rows()] == [False, False, True, False]
    # llama-server's infeasible 200 tok/s trial does not count
    assert c.to_dict()["best"] == {
        "study": "S-vllm",
        "backend": "vllm",
        "trial": 1,
        "argv": ["server", "--deployed"],
        "why": c.why,
    }


def test_bests_within_noise_are_a_tie_named_by_the_better_mean():
    close = results("S-vllm", "vllm", [outcome(0, 100, 200), outcome(1, 125, 250)])
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", close)])
    assert c.winner.backend == "vllm" and c.why.startswith("tied within noise")


def test_a_re_measured_best_is_compared_on_its_re_measurement():
    # issue 22 §5: the first measurement of a best was selected as the maximum (biased up)
    remeasured = results("S-vllm", "vllm", [outcome(0, 150, 200, again=148), outcome(1, 170, 250, again=175)])
    c = compare_studies([("S-llama-server", LLAMA), ("S-vllm", remeasured)])
    rows = {(r["backend"], r["role"]): r for r in c.rows()}
    assert rows["vllm", "best"]["output_throughput"] == 175 and rows["vllm", "best"]["measurements"] == 1
    assert rows["vllm", "defaults"]["output_throughput"] == 148
    assert rows["llama-server", "best"]["measurements"] == 1
    assert "vllm's best, trial 1: 175 +/-" in c.why and "pooled noise" in c.why


def test_no_feasible_config_anywhere():
    bad = [outcome(0, 10, 5000, feasible=False)]
    c = compare_studies([("a", results("a", "llama-server", bad)), ("b", results("b", "vllm", bad))])
    assert c.winner is None and c.why == "no study has a feasible config"
    assert [r["trial"] for r in c.rows() if r["role"] == "best"] == [None, None]


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
    assert compare_studies([("a", a), ("c", c)]).winner is not None  # one backend: the same bar
