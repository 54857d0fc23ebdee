"""`kvtune plan`'s mistakes, as tests/integration/cli/test_bad_input.py tables the other commands'
(issue 29): each row is the argv after `kvtune plan` and a phrase the one-line error must
contain. Every row must exit 2 with exactly one line on stderr and start no server: the
llama-server kvtune would find is a script that logs every call. A size without a unit, a
count below 1, a shape half given or given twice, an unknown GPU or cache type: all refused
before the model is read or the host is probed. A model path refused opens with --model.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SHAPE = ["--layers", "32", "--kv-heads", "8", "--head-dim", "128"]

ROWS: list[tuple[str, list[str], str]] = [
    # what the user gave                   argv after `kvtune plan`                         phrase
    ("memory without a unit", [*SHAPE, "--memory", "24"], "--memory 24 has no unit: give one, e.g. 24GiB"),
    ("memory in exponent form", [*SHAPE, "--memory", "2.4e10"], "--memory 2.4e10 has no unit"),
    ("weights without a unit", [*SHAPE, "--weights", "15"], "--weights 15 has no unit: give one, e.g. 15GiB"),
    ("reserve without a unit", [*SHAPE, "--reserve", "2"], "--reserve 2 has no unit: give one, e.g. 2GiB"),
    ("bandwidth without a unit", [*SHAPE, "--bandwidth", "1000"], "--bandwidth 1000 has no unit: give one"),
    ("memory that is no size", [*SHAPE, "--memory", "lots"], "--memory 'lots' is not understood"),
    ("a unit that is no unit", [*SHAPE, "--memory", "24GiBs"], "expected a size like 24GiB"),
    ("no memory at all", [*SHAPE, "--memory", "0"], "--memory 0: expected a size above 0"),
    ("zero bandwidth", [*SHAPE, "--bandwidth", "0TB/s"], "must be a positive"),
    ("a context of 0", [*SHAPE, "--context", "0"], "--context must be at least 1 token"),
    ("a negative context", [*SHAPE, "--context", "-5"], "--context must be at least 1 token"),
    ("no users", [*SHAPE, "--users", "0"], "--users must be at least 1, got 0"),
    (
        "a context past any model",
        [*SHAPE, "--context", "1" + "0" * 30],
        "--context must be at most 100000000, got 1e+30",
    ),
    ("users past any machine", [*SHAPE, "--users", "200000"], "--users must be at most 100000, got 200000"),
    ("layers past any model", ["--layers", str(2**63), *SHAPE[2:]], "--layers must be at most 100000"),
    ("negative users", [*SHAPE, "--users", "-3"], "--users must be at least 1, got -3"),
    ("no slots", [*SHAPE, "--parallel", "0"], "--parallel must be at least 1, got 0"),
    ("no GPUs", [*SHAPE, "--gpu", "L4", "--gpus", "0"], "--gpus must be at least 1, got 0"),
    ("more GPUs than this machine has", [*SHAPE, "--gpus", "64"], "--gpus 64: this machine has"),
    ("an unknown GPU", [*SHAPE, "--gpu", "H1000"], "unknown GPU 'H1000': use one of"),
    ("an empty GPU name", [*SHAPE, "--gpu", " "], "--gpu needs a GPU model"),
    ("an unknown cache type", [*SHAPE, "--context", "4096", "--cache-type", "q9"], "unknown cache type 'q9'"),
    ("half a shape", ["--layers", "32"], "missing --kv-heads, --head-dim"),
    ("no model and no shape", [], "pass --model PATH, or the shape"),
    ("a layer count of 0", ["--layers", "0", "--kv-heads", "8", "--head-dim", "128"], "--layers must be positive"),
    ("negative KV heads", ["--layers", "32", "--kv-heads", "-8", "--head-dim", "128"], "--kv-heads must be positive"),
    ("zero heads", [*SHAPE, "--heads", "0"], "--heads must be positive"),
    ("a model that is not there", ["--model", "{d}/nope.gguf"], "error: --model '{d}/nope.gguf' does not exist"),
    ("a folder with no model in it", ["--model", "{d}"], "error: --model '{d}' is a folder with no config.json"),
    ("a script as a model", ["--model", "{d}/llama-server"], "error: --model '{d}/llama-server' is neither a .gguf"),
    ("a model and a shape", ["--model", "{d}/nope.gguf", "--layers", "32"], "--model with --layers: give one"),
    ("no context the model states", [*SHAPE], "no context length: pass --context N"),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-plan-input")
    server = d / "llama-server"
    server.write_text(
        f'#!/bin/sh\necho "$@" >> {d}/calls.log\ncase "$*" in *--help*|*--version*) exit 0;; esac\nsleep 30\n'
    )
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    return d


@pytest.mark.parametrize("what,argv,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_a_plan_mistake_is_one_line_exit_2_and_nothing_started(inputs, tmp_path, what, argv, phrase):
    args = [a.replace("{d}", str(inputs)) for a in argv]
    env = {**os.environ, "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server")}
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "plan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (what, r.returncode, r.stdout, r.stderr)
    phrase = phrase.replace("{d}", str(inputs))  # a path refused is named as typed: the flag, then the path
    assert len(lines) == 1 and phrase in lines[0], (what, r.stderr)
    assert not r.stdout.strip(), f"{what}: a plan was printed before the refusal: {r.stdout}"
    assert not list(tmp_path.iterdir()), f"{what}: files were written: {list(tmp_path.iterdir())}"
    calls = (inputs / "calls.log").read_text().splitlines() if (inputs / "calls.log").exists() else []
    assert all("--help" in c or "--version" in c for c in calls), f"{what}: a server was started: {calls}"
