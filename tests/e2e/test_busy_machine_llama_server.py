"""A busy machine during the baseline's measurement, end to end (real llama-server, demo model).

The test starts CPU hogs (one busy-loop python per core, killed by pid) when the baseline's
measured phase begins, read from `kvtune run --jsonl`'s events, and stops them once the runner
says the measurement was disturbed. kvtune must name the hogs in the dropped measurement's
window, measure the baseline again, and name the same best (or one of the same tie) as a run of
the same study without the hogs. A small fixed space (parallel 1 or 4, threads fixed) keeps the
best stable and the test to a few minutes.
"""

from __future__ import annotations

import json
import os
import signal
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
    "32",
    "--num-requests",
    "16",
    "--warmup-requests",
    "1",
    # the confirmation's duel decides between near-equal configs (parallel 4 is about the defaults
    # here): named on first measurements alone, a CI run named trial 2 quiet and trial 0 busy
    # (32.15 vs 31.71 tok/s, a coin flip); a tie in the duel goes to the defaults
    "--confirm-top",
    "1",
    "--confirm-pairs",
    "2",
    "--trials",
    "3",
    "--sampler",
    "grid",
]
SPACE = "space:\n  parallel: [1, 4]\n  threads: 2\n"
HOG = "while True:\n    pass\n"


def run_study(tmp: Path, name: str, hog: bool) -> tuple[dict, list[dict], list[int]]:
    """`kvtune run --jsonl`; with `hog`, CPU hogs during the baseline's first measurement. The
    results, the events and the hogs' pids."""
    study = tmp / "space.yaml"
    study.write_text(SPACE)
    argv = [
        sys.executable,
        "-m",
        "kvtune.cli",
        "run",
        "--study-file",
        str(study),
        "--study",
        name,
        "--runs-dir",
        str(tmp),
        "--jsonl",
        *WORKLOAD,
    ]
    proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    events, hogs, pids = [], [], []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            events.append(event)
            phase = event.get("phase", "") if event.get("event") == "phase" and event.get("trial") == 0 else ""
            if hog and phase == "measuring" and not pids:
                hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(os.cpu_count() or 2)]
                pids = [h.pid for h in hogs]
            if hogs and (phase.startswith("measurement 1 ") or event.get("event") == "trial_finished"):
                for h in hogs:
                    os.kill(h.pid, signal.SIGKILL)
                    h.wait()
                hogs = []
        assert proc.wait(timeout=900) == 0
    finally:
        for h in hogs:
            os.kill(h.pid, signal.SIGKILL)
            h.wait()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return json.loads((tmp / name / "results.json").read_text()), events, pids


def best_set(results: dict) -> set:
    named = results["named_best"]
    return {named["trial"], *named.get("tied_with", [])}


def test_a_disturbed_baseline_measurement_is_re_measured_and_the_best_is_unchanged(tmp_path, llama_server):
    quiet, _, _ = run_study(tmp_path, "quiet", hog=False)
    busy, events, pids = run_study(tmp_path, "busy", hog=True)
    base = busy["trials"][0]
    assert base["baseline"] and pids
    dropped = base["disturbed_attempts"]
    assert dropped, f"the hogged measurement was not judged disturbed: {base['interference']}"
    assert dropped[0]["foreign_cores"] > 0.5
    assert {c["pid"] for c in dropped[0]["top"]} & set(pids), dropped[0]["top"]
    phases = [e["phase"] for e in events if e.get("event") == "phase" and e.get("trial") == 0]
    assert any(p.startswith("measurement 1 disturbed") and "re-measuring" in p for p in phases), phases
    assert base["metrics"] and len(dropped) <= 2
    listed = [d for d in busy["disturbed"] if d["trial"] == 0]
    assert listed and listed[0]["remeasured"] == len(dropped)
    # the same best (or one of the same tie) as without the hogs
    assert best_set(busy) & best_set(quiet), (busy["named_best"], quiet["named_best"])
    assert busy["named_best"]["remeasured"] and quiet["named_best"]["remeasured"]
