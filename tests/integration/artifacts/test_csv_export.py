"""`kvtune export --format csv`: one row per trial, one column per flag and per metric, stable.

Here the tests that start processes; the rest are in tests/unit/artifacts/test_csv_export.py."""

from __future__ import annotations

import json
import subprocess
import sys

from kvtune.artifacts import export
from tests.paths import UNIT_DATA

DATA = UNIT_DATA


def results() -> dict:
    return json.loads((DATA / "results_small.json").read_text())


def test_export_cli_writes_the_csv_without_picking_a_trial(tmp_path) -> None:
    run_dir = tmp_path / "s2"
    run_dir.mkdir()
    r = results()
    for t in r["trials"]:  # nothing feasible: a csv is still every trial
        t["constraints"]["server_ran"] = 1.0
    (run_dir / "results.json").write_text(json.dumps(r))
    out = tmp_path / "trials.csv"
    p = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "export", str(run_dir), "--format", "csv", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert out.read_text() == export.render("csv", {}, r) and "(csv)" in p.stderr
