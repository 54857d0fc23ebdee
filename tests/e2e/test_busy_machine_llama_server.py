"""A busy machine during the baseline's measurement, end to end (real llama-server, demo model).

The test starts CPU hogs (one busy-loop python per core, killed by pid) when the baseline's
measured phase begins, read from `kvtune run --jsonl`'s events, and stops them once the runner
says the measurement was disturbed, or after 30 s. kvtune must name the hogs in the dropped
measurement's window, measure the baseline again, and keep a figure the hogs did not touch: it is near the
baseline's own re-measurements on fresh servers once the machine is quiet (the end-of-search
sentinel, the verdict's proof runs), where a hogged one is 3-5x lower (one busy loop moved the demo
baseline 3x, interference/observed.py). Every other measurement of the study is quiet, so
with that figure the study is a quiet one, and it names a re-measured best. (A second, quiet run
of the whole study as the reference for its best doubled the test's time: 342 s in CI.) A small
fixed space (parallel 1 or 4, threads fixed) keeps the test to a few minutes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
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
    "--set",
    "workload.num_requests=16",
    "--set",
    "workload.warmup_requests=1",
    # the end-of-search sentinel re-measures the baseline on a fresh server (the quiet figure its
    # kept one is checked against) and the verdict's two pairs (D W W D) name a re-measured best
    "--set",
    "confirm_top=1",
    "--set",
    "confirm_pairs=2",
    "--trials",
    "3",
    "--set",
    "sampler=grid",
]
SPACE = "space:\n  parallel: [1, 4]\n  threads: 2\n"
HOG = "while True:\n    pass\n"
HOG_S = 30.0  # at most this long (see Hogs)


class Hogs:
    """One busy-loop python per core, started once and ended by PID: when the runner says the
    measurement was judged (its phase event), or after `HOG_S`, whichever comes first. The
    hogs slow llama-server 3-40x, so a hogged measurement left to finish took up to 728 s of CI;
    `HOG_S` of them are plenty for the monitor (the window's mean foreign CPU stays far above
    its 0.25-core threshold) and the rest of the measurement runs quiet."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.pids: list[int] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        self.procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(os.cpu_count() or 2)]
        self.pids = [h.pid for h in self.procs]
        self._timer = threading.Timer(HOG_S, self.stop)
        self._timer.start()

    def stop(self) -> None:
        with self._lock:
            for h in self.procs:
                if h.poll() is None:
                    os.kill(h.pid, signal.SIGKILL)
                h.wait()
            self.procs = []
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()


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
    events: list[dict] = []
    hogs = Hogs()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            events.append(event)
            phase = event.get("phase", "") if event.get("event") == "phase" and event.get("trial") == 0 else ""
            if hog and phase == "measuring" and not hogs.pids:
                hogs.start()
            if phase.startswith("measurement 1 ") or event.get("event") == "trial_finished":
                hogs.stop()
        assert proc.wait(timeout=900) == 0
    finally:
        hogs.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return json.loads((tmp / name / "results.json").read_text()), events, hogs.pids


def test_a_disturbed_baseline_measurement_is_re_measured_and_a_quiet_figure_kept(tmp_path, llama_server):
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
    # the kept figure is not a hogged one: above 0.6x the mean of the baseline's valid
    # re-measurements on fresh servers after the hogs were gone. A hogged figure is 3-5x lower
    # (11.8 vs 58 tok/s when every re-measurement stayed disturbed); two quiet measurements of
    # one config on a shared 2-core machine were seen 15-30% apart, either way
    quiet = [r["objective"] for r in (base["confirmation"] or {}).get("runs", []) if r["valid"] and r["objective"]]
    assert quiet, base["confirmation"]
    assert base["objective"] > 0.6 * sum(quiet) / len(quiet), (base["objective"], quiet)
    assert busy["named_best"]["remeasured"]
