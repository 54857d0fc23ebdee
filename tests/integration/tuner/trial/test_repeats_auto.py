"""`--repeats auto`: measure again on the same server until the objective's 95% confidence
half-width is within 3% of its mean, or 5 runs; the metrics say how many it took.

Here the tests that start processes; the rest are in tests/unit/tuner/trial/test_repeats_auto.py."""

from __future__ import annotations

import os
import subprocess
import sys

from kvtune.workload import Workload

W = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1)


def test_cli_bad_repeats_is_one_line_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "run", "--set", "repeats=lots", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "repeats must be" in r.stderr
    assert not any(tmp_path.iterdir())
