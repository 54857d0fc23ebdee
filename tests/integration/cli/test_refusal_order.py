"""A refusal that comes once the study is opened (a study of that name with other settings) is
still the only output (issue 41): no run header on stdout before it, and no empty runs folder
left behind. The study is set up first (`--setup-only`: no server starts), then run again with
another workload; the llama-server kvtune finds is asked `--help` only."""

from __future__ import annotations

import os
import subprocess
import sys


def kvtune(args: list[str], cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


def test_a_study_with_other_settings_is_refused_before_the_header(tmp_path):
    env = {**os.environ, "COLUMNS": "400"}
    env.pop("KVTUNE_STORAGE", None)
    runs = tmp_path / "runs"
    common = ["--runs-dir", str(runs), "--storage", f"sqlite:///{tmp_path / 's.db'}", "--study", "s"]
    made = kvtune(["run", *common, "--setup-only"], tmp_path, env)
    assert made.returncode == 0, made.stderr
    r = kvtune(["run", *common, "--concurrency", "3"], tmp_path, env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines) == 1 and "already exists with a different workload" in lines[0], r.stderr
    assert not r.stdout.strip(), f"printed before the refusal: {r.stdout}"
    assert not (runs / "s").exists() or any((runs / "s").iterdir()), "an empty runs folder was left"
