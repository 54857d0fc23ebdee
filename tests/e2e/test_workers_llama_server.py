"""Two workers on this machine against the real llama-server, one core each, on SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import optuna
import pytest

from kvtune.errors import KvtuneError
from kvtune.launchers.llama_server import find_llama_server
from kvtune.tuner import accounting
from tests.e2e.conftest import SMALL

pytestmark = pytest.mark.e2e


def test_two_workers_one_core_each(tmp_path):
    try:
        find_llama_server()
    except KvtuneError as e:
        pytest.skip(str(e))
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            "run",
            "--workers",
            "2",
            "--trials",
            "5",
            "--target",
            "ttft<60s",
            "--study",
            "w2",
            "--runs-dir",
            str(tmp_path),
            *SMALL,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 workers" in r.stdout
    study = optuna.load_study(study_name="w2", storage=f"sqlite:///{tmp_path / 'w2' / 'study.db'}")
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    # --trials counts measured configs; pre-screen rejections and duplicates are told but free
    measured = [t for t in complete if accounting.kind_of(t) == "measured"]
    assert len(measured) == 5, [(t.number, accounting.kind_of(t)) for t in complete]
    slots = {t.user_attrs["worker"]["slot"]: t.user_attrs["worker"]["cpus"] for t in complete}
    assert set(slots) == {0, 1}, "both workers ran trials"
    assert slots[0] != slots[1] and all(len(c) == 1 for c in slots.values())  # one core each
    results = json.loads((tmp_path / "w2" / "results.json").read_text())
    assert results["best_trial"] is not None and results["budget"]["measured"] == 5
    assert (tmp_path / "w2" / "worker-1.log").exists()
