"""A trace that cannot be replayed as asked costs a second, never a launch (issue 30), in the
pattern of test_bad_input.py: a trace no request of which fits the model's context, a clip the
model cannot hold, a timestamp unit or a filter the file contradicts. Each row must exit 2 with
exactly one line on stderr, create no runs folder and no study database, and start no server
(the llama-server kvtune finds is a script that logs every call; a `--help`, `--version` or
`--list-devices` query is no launch). The model is the demo model: its context is 8192 tokens.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kvtune.errors import KvtuneError
from kvtune.launchers.models import demo_model_path
from tests.paths import UNIT_DATA

BURSTGPT = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "9,GPT-4,200,42,242,API log\n"
)
ROWS: list[tuple[str, list[str], str]] = [
    # what the user gave                                  argv after `kvtune`                            phrase
    (
        "a trace longer than the model's context",
        ["run", "--workload", "trace:{d}/long.jsonl"],
        "trace long cannot fit the model: its shortest request is 9050 tokens",
    ),
    (
        "setting up a study with a trace longer than the model's context",
        ["run", "--setup-only", "--storage", "sqlite:///{d}/s.db", "--workload", "trace:{d}/long.jsonl"],
        "cannot fit the model",
    ),
    (
        "a clip longer than the model's context",
        ["run", "--workload", "trace:azure-conv", "--set", "workload.trace_max_tokens=9000"],
        "exceeds the model's 8192-token context: give workload.trace_max_tokens 8148 or less",
    ),
    (
        "a time unit for dates and times",
        ["run", "--workload", "trace:azure-conv", "--set", "workload.trace_time_unit=ms"],
        "drop workload.trace_time_unit ms",
    ),
    (
        "an unknown time unit",
        ["run", "--workload", "trace:azure-conv", "--set", "workload.trace_time_unit=h"],
        "one of auto, s, ms",
    ),
    (
        "a Model filter on a trace without the column",
        ["run", "--workload", "trace:azure-conv", "--set", "workload.trace_model=ChatGPT"],
        "has no Model column",
    ),
    (
        "a Model the trace does not hold",
        ["run", "--workload", "trace:{d}/burst.csv", "--set", "workload.trace_model=gpt5"],
        "no request has Model 'gpt5' (its values: ChatGPT, GPT-4)",
    ),
    (
        "a Log Type the trace does not hold",
        ["run", "--workload", "trace:{d}/burst.csv", "--set", "workload.trace_log_type=chat log"],
        "no request has Log Type 'chat log'",
    ),
    ("a filter without a trace", ["run", "--set", "workload.trace_log_type=API log"], "applies to a trace only"),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    try:
        demo_model_path(fetch=False)
    except KvtuneError as e:
        pytest.skip(str(e))  # the model's context is what these rows are refused against
    d = tmp_path_factory.mktemp("bad-trace")
    (d / "long.jsonl").write_text(
        '{"timestamp": 0, "input_length": 9000, "output_length": 50, "hash_ids": [1]}\n'
        '{"timestamp": 10, "input_length": 12000, "output_length": 5, "hash_ids": [2]}\n'
    )
    (d / "burst.csv").write_text(BURSTGPT)
    server = d / "llama-server"
    (d / "help.txt").write_text((UNIT_DATA / "llama_server_help.txt").read_text())  # llama-server's own help
    server.write_text(
        f'#!/bin/sh\necho "$@" >> {d}/calls.log\ncase "$*" in *--help*) cat {d}/help.txt; exit 0;; '
        "*--version*|*--list-devices*) exit 0;; esac\nsleep 30\n"
    )
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    return d


@pytest.mark.parametrize("what,argv,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_a_trace_that_cannot_be_replayed_is_one_line_exit_2_and_nothing_started(inputs, tmp_path, what, argv, phrase):
    args = [a.replace("{d}", str(inputs)) for a in argv]
    env = {**os.environ, "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server")}
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args, "--runs-dir", str(tmp_path / "runs")],
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
    queries = ("--help", "--version", "--list-devices")
    assert all(any(q in c for q in queries) for c in calls), f"{what}: a server was started: {calls}"
