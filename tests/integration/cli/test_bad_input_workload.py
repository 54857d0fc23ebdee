"""Drawn lengths given wrong cost a second, never a launch (issue 30 item 4), in the pattern of
test_bad_input.py: a negative, infinite or non-numeric spread, a spread on lengths the workload
does not synthesize (a dataset's prompts, a trace's, a conversation's), on `kvtune run` (flags and
the study file's `workload:` keys) and on `kvtune bench`; and a `kvtune bench --rate` sweep
given wrong. Each row must exit 2 with exactly one
line on stderr, `kvtune: error: ...`, write no runs folder, nothing in the current folder or
beside the inputs, and start no server (the llama-server kvtune finds is a script that logs
every call; a `--help`, `--version` or `--list-devices` query is no launch). `{d}`: the inputs
folder; `{port}`: a local port nothing listens on (`kvtune bench` refuses before any request).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kvtune.launchers.process import free_port

URL = "http://127.0.0.1:{port}"
QUERIES = ("--help", "--version", "--list-devices")
ROWS: list[tuple[str, list[str], str]] = [
    # what the user gave                    argv after `kvtune`                       phrase
    (
        "run: a negative prompt spread",
        ["run", "--set", "workload.prompt_spread=-0.5"],
        "workload.prompt_spread must be a finite number >= 0",
    ),
    (
        "run: an infinite output spread",
        ["run", "--set", "workload.output_spread=inf"],
        "workload.output_spread must be a number, got 'inf'",
    ),
    (
        "run: a spread in words",
        ["run", "--set", "workload.prompt_spread=wide"],
        "workload.prompt_spread must be a number, got 'wide'",
    ),
    (
        "run: a prompt spread with a dataset",
        ["run", "--set", "workload.prompt_spread=0.5", "--dataset", "{d}/prompts.json"],
        "dataset sets its own: drop prompt_spread",
    ),
    (
        "run: a prompt spread with a trace",
        ["run", "--set", "workload.prompt_spread=0.5", "--workload", "trace:azure-conv"],
        "trace sets its own: drop prompt_spread",
    ),
    (
        "run: an output spread with conversations",
        ["run", "--set", "workload.output_spread=0.3", "--workload", "multiturn"],
        "multiturn sets its own: drop output_spread",
    ),
    (
        "study file: a negative spread",
        ["run", "--study-file", "{d}/negative.yaml"],
        "workload.output_spread must be a finite",
    ),
    (
        "study file: a spread in words",
        ["run", "--study-file", "{d}/words.yaml"],
        "workload.prompt_spread must be a number",
    ),
    (
        "study file: a spread mistyped",
        ["run", "--study-file", "{d}/typo.yaml"],
        "workload has unknown key(s) ['prompt_sprad']",
    ),
    (
        "bench: a negative spread",
        ["bench", URL, "--set", "workload.output_spread=-1"],
        "output_spread must be a finite number >= 0",
    ),
    ("bench: a rate list in words", ["bench", URL, "--rate", "1,2,many"], "--rate takes a number, got 'many'"),
    ("bench: a negative rate in a sweep", ["bench", URL, "--rate", "2,-1"], "--rate must be a positive number"),
    (
        "bench: a sweep saved to one file",
        ["bench", URL, "--rate", "1,2", "--save", "{d}/r.json"],
        "--save writes one run's JSON",
    ),
    (
        "bench: a NaN spread",
        ["bench", URL, "--set", "workload.prompt_spread=nan"],
        "workload.prompt_spread must be a number, got 'nan'",
    ),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-workload")
    (d / "prompts.json").write_text('[{"conversations": [{"from": "human", "value": "hello there"}]}]\n')
    (d / "negative.yaml").write_text("study: s\nworkload:\n  output_spread: -0.2\n")
    (d / "words.yaml").write_text("study: s\nworkload:\n  prompt_spread: wide\n")
    (d / "typo.yaml").write_text("study: s\nworkload:\n  prompt_sprad: 0.5\n")
    server = d / "llama-server"
    server.write_text(
        f'#!/bin/sh\necho "$@" >> {d}/calls.log\ncase "$*" in *--help*|*--version*|*--list-devices*) exit 0;; esac\n'
        "sleep 30\n"
    )
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    return d


def listing(d: Path) -> list[str]:
    """Every file and folder under `d` but the fake server's call log."""
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.name != "calls.log")


@pytest.mark.parametrize("what,argv,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_a_bad_spread_is_one_line_exit_2_and_nothing_started(inputs, tmp_path, what, argv, phrase):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (inputs / "calls.log").unlink(missing_ok=True)
    before = listing(inputs)
    args = [a.replace("{d}", str(inputs)).replace("{port}", str(free_port())) for a in argv]
    if args[0] == "run":
        args[1:1] = ["--runs-dir", str(tmp_path / "runs")]
    env = {**os.environ, "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server"), "COLUMNS": "400"}
    env.pop("KVTUNE_STORAGE", None)
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (what, r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("kvtune: error: ") and phrase in lines[0], (what, r.stderr)
    assert not (tmp_path / "runs").exists(), f"{what}: a runs folder was written"
    assert not list(cwd.iterdir()), f"{what}: written in the current folder: {list(cwd.iterdir())}"
    assert listing(inputs) == before, f"{what}: written beside the inputs (a study database?)"
    calls = (inputs / "calls.log").read_text().splitlines() if (inputs / "calls.log").exists() else []
    assert all(any(q in c for q in QUERIES) for c in calls), f"{what}: a server was started: {calls}"
