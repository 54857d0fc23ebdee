"""`kvtune compare`: the side-by-side table of studies already run, and its refusals (one line,
exit status 2): one study, an unknown study, studies that measured different things."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvtune
from tests.unit.artifacts.test_compare import LLAMA, VLLM, decided, outcome, results

SRC = str(Path(kvtune.__file__).parents[1])  # the child runs this checkout's kvtune


def kvtune(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "KVTUNE_CACHE": str(cwd / "cache"), "PYTHONPATH": SRC},
    )


@pytest.fixture
def runs(tmp_path):
    for name, r in (
        ("S-llama-server", LLAMA),
        ("S-vllm", VLLM),
        ("other", results("other", "vllm", [outcome(0, 1, 1)], concurrency=2)),
        # the search put its best at 300 tok/s; its fresh runs overlap llama-server's best's
        (
            "S-close",
            results("S-close", "vllm", decided([outcome(0, 100, 200), outcome(1, 300, 250, fresh=[112, 131, 122])], 1)),
        ),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(r))
    return tmp_path


def test_side_by_side(runs):
    r = kvtune("compare", "S-llama-server", "S-vllm", "--runs-dir", str(runs), "-o", str(runs / "c.json"), cwd=runs)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any("llama-server" in ln and "best: trial 1" in ln and "120.0" in ln for ln in lines)
    assert any("vllm" in ln and "defaults: trial 0" in ln and "150.0" in ln for ln in lines)
    assert "Best overall: vllm, trial 1 of study S-vllm (max-num-seqs=8)" in r.stdout
    assert json.loads((runs / "c.json").read_text())["best"]["study"] == "S-vllm"
    assert "better on fresh servers on output_throughput (vllm over llama-server +41.7%" in r.stdout


def test_overlapping_intervals_name_no_winner(runs):
    r = kvtune("compare", "S-llama-server", "S-close", "--runs-dir", str(runs), "-o", str(runs / "c.json"), cwd=runs)
    assert r.returncode == 0, r.stderr
    assert "No best overall" in r.stdout and "why: no winner: the intervals overlap on output_throughput" in r.stdout
    assert "llama-server's best, trial 1: 120 [117.5, 122.5], 3 fresh runs" in r.stdout
    assert "<- best overall" not in r.stdout
    assert json.loads((runs / "c.json").read_text())["best"]["study"] is None


def test_report_page(runs):
    r = kvtune(
        "compare", "S-llama-server", "S-vllm", "--runs-dir", str(runs), "--report", str(runs / "c.html"), cwd=runs
    )
    assert r.returncode == 0, r.stderr
    assert 'id="plot-backends"' in (runs / "c.html").read_text()


def test_kvtune_report_of_a_comparison(runs):
    (runs / "S").mkdir()
    (runs / "S" / "compare.json").write_text(json.dumps({"name": "S", "studies": ["S-llama-server", "S-vllm"]}))
    r = kvtune("report", "S", "--runs-dir", str(runs), cwd=runs)
    assert r.returncode == 0, r.stderr
    assert "kvtune comparison: S" in (runs / "S" / "report.html").read_text()


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["S-vllm"], "compare needs two studies or more, got 1"),
        (["S-vllm", "nope"], "no study 'nope'"),
        (["S-vllm", "S-vllm"], "'S-vllm' is given twice"),
        (["S-vllm", "./S-vllm"], "'S-vllm' and './S-vllm' are the same study"),
        (["S-llama-server", "other"], "did not measure the same thing: workload concurrency 8 vs 2"),
    ],
)
def test_refusals_are_one_line_exit_2(runs, args, fragment):
    r = kvtune("compare", *args, "--runs-dir", str(runs), cwd=runs)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("kvtune: error:"), r.stderr
    assert r.stdout == ""
