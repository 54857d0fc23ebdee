"""`kvtune bench --rate 1,2,4,8` against the fake server (issue 30 item 4): one open-loop run per
rate, the goodput curve printed with a row per rate, and the exit status of the targets."""

import os
import subprocess
import sys

from kvtune.testing.fake_server import FakeOpenAIServer


def _sweep(url: str, *args: str) -> subprocess.CompletedProcess:
    argv = ["bench", url, "--num-requests", "4", "--set", "workload.warmup_requests=1", "--output-tokens", "4", *args]
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *argv],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_a_rate_sweep_prints_the_goodput_curve_and_the_highest_rate_held():
    with FakeOpenAIServer(ttft_s=0.02, itl_s=0.002) as server:
        held = _sweep(server.base_url, "--rate", "8,4", "--slo", "ttft<2s", "--target", "ttft<5s")
        missed = _sweep(server.base_url, "--rate", "4,8", "--target", "ttft<1ms")
    assert held.returncode == 0, held.stdout + held.stderr
    assert "goodput curve" in held.stdout and "goodput (req/s)" in held.stdout
    rows = [ln for ln in held.stdout.splitlines() if ln.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == ["4", "8"]  # ascending, one row per rate
    assert all(r.rstrip().endswith("met │") for r in rows)
    assert "open loop at 4 req/s" in held.stdout and "open loop at 8 req/s" in held.stdout
    assert "highest rate meeting every target: 8 req/s" in held.stdout
    assert missed.returncode == 1, missed.stdout + missed.stderr
    assert "no rate met every target (lowest tried: 4 req/s)" in missed.stdout
