"""The report and `kvtune show` list the measurements the machine's other load disturbed
(a real results.json of a small llama-server study, one trial marked disturbed)."""

from __future__ import annotations

import copy
import json

from typer.testing import CliRunner

from kvtune.artifacts import report
from kvtune.cli.app import app
from tests.paths import UNIT_DATA

BUSY = {"disturbed": True, "foreign_cores": 1.7, "reason": "disturbed: foreign CPU 1.70 cores on average"}


def with_disturbed() -> dict:
    r = json.loads((UNIT_DATA / "results_small.json").read_text())
    r = copy.deepcopy(r)
    r["trials"][1]["interference"] = dict(BUSY, disturbed=False, foreign_cores=0.03, reason="quiet")
    r["trials"][1]["disturbed_attempts"] = [BUSY]
    return r


def test_the_report_lists_a_disturbed_measurement_and_that_it_was_re_measured():
    html = report.render_report(with_disturbed())
    assert "id='disturbed-table'" in html and "foreign CPU 1.70 cores on average" in html
    number = with_disturbed()["trials"][1]["number"]
    assert f"<td>#{number}</td><td>first measurement</td><td class='num'>1.70</td>" in html


def test_a_study_without_disturbed_measurements_has_no_such_section():
    r = json.loads((UNIT_DATA / "results_small.json").read_text())
    assert "disturbed-table" not in report.render_report(r)


def test_show_lists_the_disturbed_measurements(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(with_disturbed()))
    result = CliRunner().invoke(app, ["show", str(d)])
    assert result.exit_code == 0, result.output
    assert "Disturbed measurements" in result.output and "re-measured 1x, then quiet" in result.output
