"""Where the study's time went, in the report, `kvtune show` and results.json (a real results.json
of a small llama-server study, its launches given time records; study/time_spent.py sums them)."""

from __future__ import annotations

import copy
import json
import re

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


def anchored_and_load_searched() -> dict:
    """`timed()` whose defaults were measured again twice for the anchor and whose nearest config's
    load was searched (their blocks as the session writes them into results.json)."""
    r = timed()
    r["anchor"] = {"runs": [{"quiet": False, "time_spent": FRESH}, {"quiet": True, "time_spent": FRESH}]}
    r["load_search"] = {"load": {"trial": 0, "held": 2.0}, "time_spent": SEARCH}
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


def test_the_anchor_and_the_load_search_get_a_column_only_when_they_launched():
    plain = report.render_report(timed())
    assert ">anchor</th>" not in plain and ">load search</th>" not in plain
    r = anchored_and_load_searched()
    n = len(r["trials"])
    html = report.render_report(r)
    table = html[html.index("id='time-table'") :]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)[:6]
    assert heads == ["phase", "search", "anchor", "confirmation", "load search", "all"]
    assert "title='the defaults measured again, quiet, to anchor relative targets'" in table
    assert f"hardware time: {format_duration(n * 77 + 2 * 34 + 43)} in {2 * n + 3} launches" in html
    # the start-up row: search, anchor (2 x 20 s), confirmation, load search (30 s), all
    assert (
        f"<tr><td>start-up</td><td class='num'>{format_duration(30 * n)}</td><td class='num'>40s</td>"
        f"<td class='num'>{format_duration(20 * n)}</td><td class='num'>30s</td>"
    ) in table


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
    assert "anchor" not in out.output and "load search" not in out.output


def test_show_names_the_anchor_and_the_load_search_when_they_launched(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(anchored_and_load_searched()))
    out = CliRunner().invoke(app, ["show", str(d)])
    assert out.exit_code == 0, out.output
    line = next(ln for ln in out.output.splitlines() if ln.startswith("hardware time: "))
    assert "anchor 1m8s (2 launches)" in line and line.endswith("load search 43s (1 launch)")


def test_results_json_holds_the_studys_sum():
    o = TrialOutcome(number=0, candidate=Candidate(), argv=[], env={}, baseline=True, time_spent=SEARCH)
    payload = build_payload("s", {}, {}, "v", [], (objective("output_throughput"),), [o])
    assert payload["time_spent"]["search"]["total_s"] == 43 and payload["time_spent"]["launches"] == 1
