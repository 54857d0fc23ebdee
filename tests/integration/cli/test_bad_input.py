"""Bad input costs a second, never a launch (issue 29): a table of what a careful user would
mistype, on every command that starts trials or writes files. Each row: the argv, and a phrase
the one-line error must contain. Every row must exit 2 with exactly one line on stderr, create no
runs folder and no study database, and start no server: the llama-server kvtune finds is a
script that logs every call (a `--help` or `--version` query is allowed; anything else would be
a server launch).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROWS: list[tuple[str, list[str], str]] = [
    # what the user gave                                  argv after `kvtune`                            phrase
    ("empty trace", ["run", "--workload", "trace:{d}/empty.csv"], "is empty"),
    ("trace of unknown format", ["run", "--workload", "trace:{d}/bad.csv"], "unknown format"),
    ("a shipped trace's name mistyped", ["run", "--workload", "trace:azure-conf"], "shipped traces: azure-conv"),
    ("a trace that is not there", ["run", "--workload", "trace:{d}/nope.csv"], "does not exist"),
    ("--workload of another kind", ["run", "--workload", "tracefile.csv"], "--workload takes multiturn or trace:FILE"),
    ("a dataset that is not there", ["run", "--dataset", "{d}/nope.json"], "does not exist"),
    ("a dataset without prompts", ["run", "--dataset", "{d}/no-prompts.json"], "has no prompts"),
    (
        "conversations without human turns",
        ["run", "--dataset", "{d}/no-prompts.json", "--workload", "multiturn"],
        "has no conversations",
    ),
    ("a study file that is not there", ["run", "--study-file", "{d}/nope.yaml"], "does not exist"),
    ("a study file naming a missing trace", ["run", "--study-file", "{d}/missing-trace.yaml"], "does not exist"),
    ("a target that does not parse", ["run", "--target", "ttft<<1s"], "cannot parse target"),
    ("no trials", ["run", "--trials", "0"], "trials must be at least 1"),
    ("one confirmation pair", ["run", "--confirm-pairs", "1"], "confirm_pairs must be a whole number of at least 2"),
    ("port 0", ["run", "--deploy-port", "0"], "--deploy-port must be a TCP port"),
    ("port 70000", ["run", "--deploy-port", "70000"], "--deploy-port must be a TCP port"),
    ("no users", ["run", "--concurrency", "0"], "concurrency must be at least 1"),
    ("a time budget that is no duration", ["run", "--time-budget", "banana"], "is not a duration"),
    ("an unknown backend", ["run", "--backend", "nope"], "unknown backend"),
    ("a model that is not there", ["run", "--model", "{d}/nope.gguf"], "does not exist"),
    ("an unknown objective", ["run", "--objective", "nope"], "unknown objective"),
    ("an unknown sampler", ["run", "--sampler", "nope"], "unknown sampler"),
    ("negative repeats", ["run", "--repeats", "-1"], "repeats must be"),
    (
        "setting up a study with a missing trace",
        ["run", "--setup-only", "--storage", "sqlite:///{d}/s.db", "--workload", "trace:{d}/nope.csv"],
        "does not exist",
    ),
    (
        "a worker with no slots",
        ["worker", "--slots", "0", "--storage", "sqlite:///{d}/w.db", "--study", "s"],
        "--slots must be at least 1",
    ),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-input")
    (d / "empty.csv").write_text("")
    (d / "bad.csv").write_text("a,b\n1,2\n")
    (d / "no-prompts.json").write_text('{"x": 1}\n')
    (d / "missing-trace.yaml").write_text(f"study: s\nworkload:\n  trace: {d}/nope.csv\n")
    server = d / "llama-server"
    server.write_text(
        f'#!/bin/sh\necho "$@" >> {d}/calls.log\ncase "$*" in *--help*|*--version*) exit 0;; esac\nsleep 30\n'
    )
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    return d


@pytest.mark.parametrize("what,argv,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_one_line_exit_2_and_nothing_started(inputs, tmp_path, what, argv, phrase):
    args = [a.replace("{d}", str(inputs)) for a in argv]
    env = {**os.environ, "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            *args,
            *(["--runs-dir", str(tmp_path / "runs")] if args[0] != "plan" else []),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (what, r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and phrase in lines[0], (what, r.stderr)
    assert not (tmp_path / "runs").exists(), f"{what}: a runs folder was written"
    assert not list(inputs.glob("*.db")), f"{what}: a study database was written"
    calls = (inputs / "calls.log").read_text().splitlines() if (inputs / "calls.log").exists() else []
    assert all("--help" in c or "--version" in c for c in calls), f"{what}: a server was started: {calls}"


def test_version():
    r = subprocess.run([sys.executable, "-m", "kvtune.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("kvtune ")
