"""One set of figures for the best (issue 41 item 4): a finished study built from its outcome
objects (search measurements, the verdict's proof runs D W W D D W, the verdict the engine reaches
on them), and every surface that shows the best (the run's summary, `kvtune show`, the report,
the launch and verify scripts' headers, the CSV export, `kvtune compare`) shows the verdict's fresh
figures with their intervals, labelled, and never the search's selected figure as the best's.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kvtune.artifacts import csv_export, export, report
from kvtune.artifacts.compare_report import render_compare_report
from kvtune.artifacts.side_by_side import compare_studies
from kvtune.artifacts.summary import StudySummary
from kvtune.cli import run_text
from kvtune.cli.app import app
from kvtune.cli.compare import print_comparison
from kvtune.jsonsafe import dumps
from kvtune.kinds import Direction, FailureKind
from kvtune.knobs import Candidate
from kvtune.objectives.targets import parse_target
from kvtune.study.best_figures import BestFigures, recorded
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import study_results
from kvtune.study.spec import StudySpec, parse_objectives
from kvtune.study.verdict_evidence import evidence_of, goal_of, policy_of
from kvtune.verdict import Done, next_step

TARGET = "tpot_p95<40ms"
# the run order of the proof, D W W D D W: (trial, output tok/s), at increasing times
PROOF = ((0, 39.0), (1, 51.0), (1, 53.0), (0, 41.0), (0, 40.0), (1, 52.0))
TIED_PROOF = ((0, 39.0), (1, 39.5), (1, 40.5), (0, 41.0), (0, 40.0), (1, 40.0))


def metrics(tput: float, tpot: float = 30.0) -> dict[str, float]:
    return {
        "output_throughput": tput,
        "request_throughput": tput / 64,
        "p95_ttft_ms": 300.0,
        "p95_tpot_ms": tpot,
        "p95_e2el_ms": 64 * tpot + 300.0,
        "error_rate": 0.0,
    }


def trial(n: int, tput: float, flags: dict | None = None, feasible: bool = True) -> TrialOutcome:
    """Trial `n` (0: the defaults) as the search measured it once."""
    return TrialOutcome(
        number=n,
        candidate=Candidate(flags or {}),
        argv=["llama-server", f"--trial={n}"],
        env={},
        baseline=n == 0,
        launched=True,
        metrics=metrics(tput, 30.0 if feasible else 45.0),
        constraints={"server_ran": 0.0, TARGET: -1.0 if feasible else 5.0},
        failure=None if feasible else FailureKind.TARGET_MISSED,
        reason="" if feasible else "missed tpot_p95",
        objective=tput,
    )


def finished(proof=PROOF, feasible: bool = True) -> list[TrialOutcome]:
    """The defaults, trial 1 (selected at a biased-up 60 tok/s in the search) and trial 2, with
    the proof's fresh runs stored on 0 and 1 and the engine's verdict attached."""
    outs = [
        trial(0, 40.0, feasible=feasible),
        trial(1, 60.0, {"parallel": 4}, feasible),
        trial(2, 45.0, {"threads": 2}),
    ]
    outs[2].constraints[TARGET] = 5.0 if not feasible else -1.0
    for at, (n, tput) in enumerate(proof):
        o = outs[n]
        runs = (o.confirmation or {}).get("runs") or []
        role = "sentinel" if n == 0 and not runs else "proof"
        run = {"role": role, "objective": tput, "metrics": metrics(tput), "feasible": True, "at": float(at)}
        values = [r["objective"] for r in runs] + [tput]
        o.confirmation = {
            "runs": [*runs, run],
            "metrics": metrics(sum(values) / len(values)),
            "objective": sum(values) / len(values),
            "feasible": True,
            "valid_runs": len(values),
        }
    goal = goal_of(Direction.MAXIMIZE, [parse_target(TARGET)], "output_throughput")
    step = next_step(evidence_of(outs), goal, policy_of(1, 3))
    assert isinstance(step, Done)
    for o in outs:
        o.verdict = step.verdict.to_dict()
    return outs


def results_of(outs: list[TrialOutcome], study: str = "S") -> tuple[dict, StudySummary]:
    spec = StudySpec(study=study, backend="llama-server", objective="output_throughput").to_dict()
    spec["targets"] = [TARGET]
    made = study_results(study, spec, {}, "llama-server 1.0", [TARGET], parse_objectives("output_throughput"), outs)
    made.payload["budget"] = {"measured": len(outs), "elapsed_s": 90.0, "stopped": "trials"}
    payload = json.loads(dumps(made.payload))
    return payload, StudySummary(0, payload, Path("results.json"), made.choice)


def shown(results: dict, tmp_path: Path) -> str:
    d = tmp_path / results["study"]
    d.mkdir(exist_ok=True)
    (d / "results.json").write_text(json.dumps(results))
    result = CliRunner().invoke(app, ["show", str(d)], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def console() -> Console:
    return Console(record=True, width=250, color_system=None)


@pytest.fixture(scope="module")
def study() -> tuple[dict, StudySummary, BestFigures]:
    results, summary = results_of(finished())
    figures = summary.choice.figures
    assert figures is not None
    return results, summary, figures


def test_the_best_figures_are_the_verdicts_proof_runs_with_its_intervals(study):
    results, summary, figures = study
    verdict = summary.choice.naming.verdict
    assert verdict is not None and verdict.named == 1 and verdict.counted.pairs == 3
    assert figures.fresh and figures.trial == 1 and figures.runs == 3
    assert figures.label() == "fresh runs: 3 each (95% interval)"
    row = figures.objective_row
    assert row is not None and row.change is not None
    effect = verdict.effect("output_throughput")
    assert effect is not None and row.change.text() == effect.text()  # the verdict's own effect
    assert row.best.value == pytest.approx((51 * 53 * 52) ** (1 / 3))
    assert recorded(results) == figures  # results.json keeps the same record


def test_the_run_summary_shows_the_fresh_figures_labelled(study):
    _, summary, figures = study
    out = console()
    out.print(run_text.best_line(summary, "output_throughput", "60 (search)"), markup=False)
    run_text._versus_baseline(summary, out)
    text = out.export_text()
    change = figures.objective_row.change.text()
    assert f"output_throughput {figures.objective_row.best.text('tok/s')}" in text and change in text
    assert "fresh runs: 3 each (95% interval)" in text and "search measurement 60 (selected, biased up)" in text
    tput = figures.row("output_throughput")
    assert tput is not None and tput.change is not None
    assert f"[{tput.change.low:+.1f}%, {tput.change.high:+.1f}%]" in text
    assert "+50.0%" not in text and "1 measurement each" not in text and "+/-" not in text


def test_show_prints_the_same_figures(study, tmp_path):
    results, _, figures = study
    text = shown(results, tmp_path)
    assert figures.objective_text() in text
    assert "search measurement 60 (selected, biased up)" in text
    assert "baseline: trial 0 (the server's defaults)" in text and "((" not in text
    assert "+50.0%" not in text


def test_the_report_shows_the_same_figures(study):
    results, _, figures = study
    html = report.render_report(results)
    tput = figures.row("output_throughput")
    assert tput is not None and tput.change is not None
    assert tput.change.text() in html and figures.objective_row.change.text() in html
    assert "fresh runs: 3 each (95% interval)" in html
    assert "+50.0%" not in html and "(server defaults)" not in html


def test_the_launch_and_verify_scripts_headers_carry_the_same_figures(study):
    results, _, figures = study
    best = next(t for t in results["trials"] if t["number"] == 1)
    for fmt in ("bash", "bench"):
        script = export.render(fmt, best, results)
        assert f"# measured: {figures.measured_text()}" in script
        assert f"# against the server's defaults: output_throughput {figures.objective_row.change.text()}" in script
        assert "60.0 tok/s" not in script
    other = next(t for t in results["trials"] if t["number"] == 2)
    assert "# measured: search measurement (1 run, selected as the maximum: biased up): output 45.0 tok/s" in (
        export.render("bash", other, results)
    )


def test_the_csv_carries_the_fresh_figures_on_the_best_and_defaults_rows(study):
    results, _, figures = study
    rows = {int(r["trial"]): r for r in csv.DictReader(io.StringIO(csv_export.render(results)))}
    obj = figures.objective_row
    assert obj is not None and obj.change is not None and obj.defaults is not None
    assert rows[1]["fresh_runs"] == "3" and float(rows[1]["fresh:objective"]) == pytest.approx(obj.best.value)
    assert float(rows[1]["change_low_pct:objective"]) == pytest.approx(obj.change.low)
    assert float(rows[0]["fresh:objective"]) == pytest.approx(obj.defaults.value)
    assert rows[2]["fresh_runs"] == "" and rows[0]["change_pct:objective"] == ""


def test_compare_shows_the_same_figures(study):
    results, _, figures = study
    other = json.loads(json.dumps(results))
    other["study"] = "S2"
    c = compare_studies([("S", results), ("S2", other)])
    best_row = next(r for r in c.rows() if r["role"] == "best")
    assert best_row["output_throughput"] == pytest.approx(figures.row("output_throughput").best.value)
    assert best_row["basis"] == "fresh runs: 3 each (95% interval)"
    out = console()
    print_comparison(c, out)
    assert "fresh runs: 3 each" in out.export_text()
    page = render_compare_report(c)
    assert "<td>fresh runs: 3 each (95% interval)</td>" in page


def test_when_the_defaults_win_no_surface_compares_them_with_themselves(tmp_path):
    results, summary = results_of(finished(TIED_PROOF))
    verdict = summary.choice.naming.verdict
    assert verdict is not None and verdict.named == 0
    figures = summary.choice.figures
    assert figures is not None and figures.fresh and figures.is_defaults and figures.objective_row.change is None
    assert summary.choice.versus_baseline == []
    html = report.render_report(results)
    assert "id='defaults-best'" in html and "plot-improvement" not in html and "best-vs-baseline" not in html
    assert "+0.0% +/-" not in html  # the tested candidate's effect is the verdict's line, with its interval
    out = console()
    run_text._versus_baseline(summary, out)
    assert out.export_text() == ""
    text = shown(results, tmp_path)
    assert "best: trial 0 (the server's defaults)" in text and "((" not in text and "+0.0% +/-" not in text
    assert "fresh runs: 3 (95% interval)" in text


def test_a_finished_study_with_no_best_says_what_it_ended_with(tmp_path):
    results, summary = results_of(finished(feasible=False))
    assert summary.choice.best is None
    text = shown(results, tmp_path)
    assert 'best: none: the study ended with "nothing meets the targets"' in text and "none yet" not in text
    assert "none yet" not in report.render_report(results)
