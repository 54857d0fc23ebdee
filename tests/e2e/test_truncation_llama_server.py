"""A per-slot context too small for the real request truncates answers: the trial is infeasible.

The pre-screen checks prompt + output tokens against the per-slot context; the chat template
(SmolLM2's adds a ~30-token system prompt and role markers) is not counted. So a slot of exactly
prompt + output tokens passes the pre-screen but cannot hold the real request. What llama-server
does then (seen with this build, --ctx-size 256 --parallel 1, a 150-word user message that is
180 prompt tokens with the template, max_tokens 128, ignore_eos): it stops generating when the slot
is full ("stop processing: n_tokens = 255, truncated = 1" in its log) and ends the stream normally
with finish_reason "length" and ``usage.completion_tokens`` of what fitted (76 of 128), no error
and no context shift. (It rounds a smaller --ctx-size up to 256 per slot.) Before kvtune counted that as a
fast success; now each such answer is a failed request and the trial's reason says "truncated".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SLOT = 256  # llama-server's smallest per-slot context (it rounds smaller ones up to 256)
PROMPT, OUTPUT = 180, 76  # prompt + output = SLOT: the pre-screen passes, + chat template does not fit


def test_too_small_slot_context_truncates_and_the_trial_is_infeasible(tmp_path: Path, llama_server: str) -> None:
    study = tmp_path / "small-slot.yaml"
    # a generous per-request timeout: on a loaded 2-core box the baseline's 76-token answers
    # have taken over 90 s, and a timeout there is not what this test is about
    study.write_text(f"space:\n  parallel: 1\n  ctx-per-slot: {SLOT}\nworkload:\n  request_timeout_s: 600\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            "run",
            "--study-file",
            str(study),
            "--study",
            "trunc",
            "--runs-dir",
            str(tmp_path),
            "--trials",
            "2",
            "--target",
            "ttft<60s",
            "--set",
            "confirm_top=0",
            "--set",
            "informed_start=false",
            "--concurrency",
            "1",
            "--prompt-tokens",
            str(PROMPT),
            "--output-tokens",
            str(OUTPUT),
            "--set",
            "workload.num_requests=2",
            "--set",
            "workload.warmup_requests=1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = json.loads((tmp_path / "trunc" / "results.json").read_text())
    baseline, small = results["trials"]
    assert baseline["baseline"] and baseline["feasible"], r.stdout + r.stderr  # default context fits
    assert f"--ctx-size {SLOT}" in " ".join(small["argv"]) and small["launched"]
    assert not small["feasible"]
    assert "truncated" in small["reason"], small["reason"]
    # the early stop ends the trial at the first truncated answer (error_rate<1% is lost then)
    assert small["metrics"]["truncated_requests"] >= 1 and small["metrics"]["error_rate"] == 1.0
    runs = json.loads((tmp_path / "trunc" / "trials" / "0001" / "bench.json").read_text())["runs"]
    sample = runs[0]["samples"][0]
    # llama-server stops when the slot is full and says so only through the token count
    assert sample["error"].startswith("truncated: ") and f" of {OUTPUT} tokens" in sample["error"]
    assert 0 < sample["output_tokens"] < OUTPUT
    assert r.returncode == 0  # the baseline is feasible and named best
