"""Where the study's time went, in the report, `kvtune show` and results.json (a real results.json
of a small llama-server study, its launches given time records; study/time_spent.py sums them)."""

from __future__ import annotations

import copy
import json

from typer.testing import CliRunner

from kvtune.artifacts import report
from kvtune.cli.app import app
from kvtune.durations import format_duration
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import build_payload
from kvtune.study.time_spent import TimeSpent
from tests.paths import UNIT_DATA

SEARCH = TimeSpent(startup_s=30, warmup_s=2, measurement_s=10, teardown_s=1).to_dict()
FRESH = TimeSpent(startup_s=20, measurement_s=10, waits_s=3, teardown_s=1).to_dict()


def timed() -> dict:
    r = copy.deepcopy(json.loads((UNIT_DATA / "results_small.json").read_text()))
    for t in r["trials"]:
        t["time_spent"] = SEARCH
        t["confirmation"] = {"runs": [{"role": "proof", "time_spent": FRESH}]}
    return r


def test_the_report_says_where_the_time_went_by_part_and_phase():
    r = timed()
    n = len(r["trials"])
    html = report.render_report(r)
    assert "id='time-table'" in html and "<h2>Where the time went</h2>" in html
    assert f"hardware time: {format_duration(n * 77)} in {2 * n} launches" in html
    assert (
        f"<tr><td>start-up</td><td class='num'>{format_duration(30 * n)}</td><td class='num'>{format_duration(20 * n)}</td>"
        in html
    )


def test_a_results_file_without_time_records_has_no_such_section():
    r = json.loads((UNIT_DATA / "results_small.json").read_text())
    for t in r["trials"]:
        t.pop("time_spent", None)
    assert "time-table" not in report.render_report(r)


def test_show_prints_the_time_lines(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(timed()))
    out = CliRunner().invoke(app, ["show", str(d)])
    assert out.exit_code == 0, out.output
    assert "hardware time: " in out.output and "by phase: start-up" in out.output


def test_results_json_holds_the_studys_sum():
    o = TrialOutcome(number=0, candidate=Candidate(), argv=[], env={}, baseline=True, time_spent=SEARCH)
    payload = build_payload("s", {}, {}, "v", [], (objective("output_throughput"),), [o])
    assert payload["time_spent"]["search"]["total_s"] == 43 and payload["time_spent"]["launches"] == 1
