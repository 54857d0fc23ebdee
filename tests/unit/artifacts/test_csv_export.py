"""`kvtune export --format csv`: one row per trial, one column per flag and per metric, stable.

The tests here start no process; those that do are in tests/integration/artifacts/test_csv_export.py."""

from __future__ import annotations

import csv
import io
import json

from kvtune.artifacts import csv_export
from tests.paths import UNIT_DATA

DATA = UNIT_DATA


def results() -> dict:
    return json.loads((DATA / "results_small.json").read_text())


def test_every_trial_is_a_row_with_its_flags_and_metrics() -> None:
    r = results()
    rows = list(csv.DictReader(io.StringIO(csv_export.render(r))))
    assert [row["trial"] for row in rows] == ["0", "1", "2", "3"]
    assert rows[0]["baseline"] == "true" and rows[0]["flag:parallel"] == ""  # the server's default
    assert rows[1]["flag:parallel"] == "2" and rows[1]["flag:cont-batching"] == "true"
    assert rows[2]["flag:cache-type-k"] == "q4_0" and rows[3]["feasible"] == "true"
    t1 = r["trials"][1]
    assert float(rows[1]["metric:output_throughput"]) == t1["metrics"]["output_throughput"]
    head = next(csv.reader(io.StringIO(csv_export.render(r))))
    flags = [h for h in head if h.startswith("flag:")]
    metrics = [h for h in head if h.startswith("metric:")]
    assert head[: len(csv_export.FIXED)] == list(csv_export.FIXED)
    assert flags == sorted(flags) and metrics == sorted(metrics)
    assert len(set(head)) == len(head)


def test_columns_do_not_depend_on_trial_order_and_missing_figures_are_empty() -> None:
    r = results()
    r["trials"][2]["metrics"] = None  # a trial that failed to start
    r["trials"][1]["metrics"]["p99_ttft_ms"] = float("inf")
    shuffled = dict(r, trials=list(reversed(r["trials"])))
    text = csv_export.render(r)
    assert text == csv_export.render(shuffled)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[2]["metric:output_throughput"] == "" and rows[1]["metric:p99_ttft_ms"] == ""


def test_the_trials_the_verdict_compared_say_their_part_in_it():
    verdict = {"kind": "MEETS_WHERE_DEFAULTS_MISS", "named": 3, "candidate": 3, "baseline": 0}
    assert csv_export.verdict_cell({"number": 3, "verdict": verdict}) == "named: MEETS_WHERE_DEFAULTS_MISS"
    assert csv_export.verdict_cell({"number": 0, "verdict": verdict}) == "defaults: MEETS_WHERE_DEFAULTS_MISS"
    kept = {**verdict, "kind": "TIED", "named": 0}
    assert csv_export.verdict_cell({"number": 3, "verdict": kept}) == "tested: TIED"
    assert csv_export.verdict_cell({"number": 5}) is None
