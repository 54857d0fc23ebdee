"""Cost and energy of the best and the baseline in the summary, results.json and the report."""

from __future__ import annotations

import json

from kvtune.artifacts import cost_energy, report
from kvtune.artifacts.overview import pick_trial
from kvtune.artifacts.summary import summarize
from kvtune.objectives.objective import objective
from kvtune.objectives.targets import parse_targets
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import StudyResults, choose_best
from tests.paths import UNIT_DATA

DATA = UNIT_DATA


def results(priced: bool = True, metered: bool = True) -> dict:
    r = json.loads((DATA / "results_small.json").read_text())
    if priced:
        r["spec"]["price_per_hour"] = 3.6
    for t in r["trials"]:
        m = t["metrics"]
        if priced:  # $3.60/h: USD per 1M tokens = 1000 / tokens per second
            m.update(
                usd_per_hour=3.6,
                cost_per_mtok=1000 / m["output_throughput"],
                cost_per_mtok_total=1000 / m["total_token_throughput"],
            )
        if metered:
            m.update(
                avg_watts=40.0, energy_j=80.0, energy_source=3.0, joules_per_output_token=40.0 / m["output_throughput"]
            )
    return r


def outcomes(r: dict) -> list[TrialOutcome]:
    return [TrialOutcome.from_dict(t) for t in r["trials"]]


def test_summary_lines_for_best_and_baseline() -> None:
    r = results()
    best, base = pick_trial(r), outcomes(r)[0]
    lines = cost_energy.lines(best, base, r["spec"])
    cost = 1000 / best.metrics["output_throughput"]
    assert lines[0].startswith(f"cost at $3.6/hour: best ${cost:.4g} per 1M output tokens")
    assert "; baseline $" in lines[0]
    assert lines[1].startswith("energy: best ") and "40.0 W average (Linux RAPL (CPU packages))" in lines[1]


def test_no_price_no_cost_line_and_unmetered_energy_is_said_so() -> None:
    r = results(priced=False, metered=False)
    assert cost_energy.lines(pick_trial(r), outcomes(r)[0], r["spec"]) == ["energy: not measurable on this machine"]


def test_results_json_and_the_run_summary_carry_them(tmp_path) -> None:
    r = results()
    payload = {k: v for k, v in r.items() if k not in ("best_argv", "launch_script")}
    objs = [objective("output_throughput")]
    chosen = StudyResults(choose_best(outcomes(r), objs, payload.get("server_defaults")), payload)
    s = summarize(tmp_path, chosen, outcomes(r), objs, parse_targets(["ttft<60s"]), "127.0.0.1", 8080)
    assert s.cost_energy == payload["cost_energy"]["summary"] and len(s.cost_energy) == 2
    assert payload["cost_energy"]["price"] == "$3.6/hour"
    assert payload["cost_energy"]["best"]["cost_per_mtok"] == s.best.metrics["cost_per_mtok"]
    assert s.verify_script == tmp_path / "verify-best.sh" and s.verify_script.read_text().startswith("#!")
    assert json.loads((tmp_path / "results.json").read_text())["verify_script"] == str(s.verify_script)


def test_the_report_has_a_cost_and_energy_section() -> None:
    html = report.render_report(results())
    assert "id='cost-energy'" in html and "USD per 1M output tokens" in html and "joules per output token" in html
    plain = report.render_report(results(priced=False, metered=False))
    assert "energy: not measurable on this machine" in plain and "cost-energy-table" not in plain
