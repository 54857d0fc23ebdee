"""Watching a study live: optuna-dashboard (PyPI) pointed at the study's PostgreSQL lists the
study and every trial kvtune stored in it, while nothing else changes (issue 31 item 5; the
docs/clusters.md's "Watch it live"). The study is run by the testing driver (the fake server, real
storage); the dashboard is the real package, started as users start it, and read through its
JSON API (what its page renders)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import optuna
import pytest

from kvtune.launchers.process import free_port

pytestmark = pytest.mark.e2e
TRIALS = 4


def _run_study(tmp_path: Path, url: str, study: str) -> None:
    argv = [sys.executable, "-m", "kvtune.testing.driver", "--runs-dir", str(tmp_path), "--storage", url]
    argv += ["--study", study, "--trials", str(TRIALS), "--requests", "4"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def _dashboard(url: str, port: int) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("optuna-dashboard")
    if not exe.exists():
        pytest.skip("optuna-dashboard is not installed (pip install 'kvtune[dashboard]')")
    return subprocess.Popen(
        [str(exe), url, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: ended by its id below
    )


def _get(base: str, path: str, deadline_s: float = 60.0) -> httpx.Response:
    end = time.monotonic() + deadline_s
    while True:
        try:
            r = httpx.get(base + path, timeout=10.0)
            if r.status_code == 200:
                return r
        except httpx.TransportError:
            pass
        if time.monotonic() > end:
            raise AssertionError(f"optuna-dashboard did not answer {path} within {deadline_s:.0f} s")
        time.sleep(0.5)


def test_the_dashboard_lists_the_study_and_its_trials(tmp_path, postgres_url):
    study = "watched"
    _run_study(tmp_path, postgres_url, study)
    stored = optuna.load_study(study_name=study, storage=postgres_url)
    port = free_port()
    proc = _dashboard(postgres_url, port)
    try:
        base = f"http://127.0.0.1:{port}"
        summaries = _get(base, "/api/studies").json()["study_summaries"]
        mine = next(s for s in summaries if s["study_name"] == study)
        detail = _get(base, f"/api/studies/{mine['study_id']}").json()
        assert [t["number"] for t in detail["trials"]] == [t.number for t in stored.trials]
        shown_states = {t["state"].lower() for t in detail["trials"]}
        assert "complete" in shown_states
        assert len(mine["directions"]) == len(stored.directions)
        assert _get(base, "/dashboard").status_code == 200  # the page itself
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    after = optuna.load_study(study_name=study, storage=postgres_url)
    assert len(after.trials) == len(stored.trials)  # reading changed nothing
