"""The exact early stop on the real llama-server and the demo model: against a target no CPU
meets, each trial but the baseline (always measured in full) ends after the few requests that
prove it lost, is recorded infeasible with why, and the summary says how much measurement time
the stops saved."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
WORKLOAD = [
    "--concurrency",
    "2",
    "--prompt-tokens",
    "32",
    "--output-tokens",
    "8",
    "--set",
    "workload.num_requests=16",
    "--set",
    "workload.warmup_requests=1",
]


def test_trials_stop_early_and_the_summary_reports_the_time_saved(tmp_path: Path, llama_server: str):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            "run",
            "--trials",
            "3",
            "--set",
            "confirm_top=0",
            "--target",
            "ttft_p95<1ms",
            "--study",
            "es",
            "--runs-dir",
            str(tmp_path),
            "--progress",
            "plain",
            *WORKLOAD,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 1, r.stdout + r.stderr  # no feasible config: the target is impossible
    results = json.loads((tmp_path / "es" / "results.json").read_text())
    measured = [t for t in results["trials"] if t["launched"]]
    assert len(measured) == 3
    base = measured[0]
    assert base["baseline"] and base["metrics"]["num_requests"] == 16  # measured in full
    for t in measured[1:]:
        # one answer slower than 4 ms already lifts p95 over 16 (interpolated) above 1 ms
        m = re.fullmatch(
            r"stopped after (\d) of 16 requests: \1 over TTFT 1 ms, p95<1ms can no "
            r"longer hold",
            t["reason"],
        )
        assert m, t["reason"]
        assert t["failure"] == "target missed" and not t["feasible"]
        assert t["metrics"]["num_requests"] == int(m[1]) < 16 == t["metrics"]["planned_requests"]
        assert t["metrics"]["early_stop_saved_s"] > 0
    assert results["early_stop"]["trials"] == 2 and results["early_stop"]["saved_s"] > 0
    assert "Early stop: 2 trial(s) stopped once a target could no longer hold, saving about" in r.stdout
