"""Bad input files and environment, by class, in the pattern of test_bad_input.py: a path that is
no regular file (a named pipe would block the read forever, /dev/zero never ends, /dev/null
reads as an empty file), a results.json that is valid JSON of another shape or not kvtune's
(`show`, `report`, `export`, `compare` read it), an HF model folder whose config.json gives its
sizes as words or infinities, a trace whose token count overflows a float, and the numbers
kvtune reads from its environment (KVTUNE_*_S) set to what is not one, which were a traceback
from the CLI's import before any command ran; KVTUNE_LLAMA_SERVER or KVTUNE_VLLM_PYTHON set to
nothing (it silently meant kvtune's own pick, and started that server), a model cache under a
file; a SQLite storage that is another program's database (Optuna added its tables beside its
own), not SQLite, or empty; a database port that is no TCP port (taken as a storage that is
down, exit 75, with a short password masked inside the driver's words); an Optuna study whose
stored spec kvtune did not write, and a warm start from another program's Optuna study; a
place to write that is a pipe or a device; a name in a path longer than a file system takes. Each row: what was given, argv after `kvtune`,
the environment it adds, the phrase of the one line. Every row must exit 2 with exactly one
line on stderr, `kvtune: error: ...`, print nothing on stdout, write nothing (no runs folder,
nothing in the current folder or beside the inputs) and start no server (the llama-server
kvtune finds logs its calls; `--help`, `--version` and `--list-devices` are no launch). The
subprocess's own timeout is what catches a read that blocks.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import optuna
import pytest

from tests.integration.cli.test_bad_input import QUERIES, kvtune, listing
from tests.paths import UNIT_DATA

NAMED_PIPE = "is a named pipe (FIFO), not a file"
LONG = "n" * 300  # a name of a path: ext4, xfs, btrfs and tmpfs take 255 bytes at most
XW = [
    "export-workers",
    "-f",
    "slurm",
    "--study",
    "s",
    "--workers",
    "2",
    "--mem",
    "4G",
    "--storage",
    "sqlite:///{d}/x.db",
]
PG_AT = "postgresql://kvtune:p@127.0.0.1:{}/kvtune"  # password 'p': masked, and no letter of the line with it
NOT_RESULTS = "is not a results.json kvtune wrote"
ROWS: list[tuple[str, list[str], dict[str, str], str]] = [
    # -- a path that is no regular file (kvtune/readable.py) --
    ("a study file that is a pipe", ["run", "--study-file", "{d}/pipe.yaml"], {}, f"'{{d}}/pipe.yaml' {NAMED_PIPE}"),
    ("a study file in UTF-16", ["run", "--study-file", "{d}/utf16.yaml"], {}, "'{d}/utf16.yaml' is UTF-16 text"),
    ("a study file that is /dev/null", ["run", "--study-file", "/dev/null"], {}, "'/dev/null' is a character device"),
    ("a dataset that is a pipe", ["run", "--dataset", "{d}/pipe.json"], {}, f"dataset '{{d}}/pipe.json' {NAMED_PIPE}"),
    ("a dataset that is /dev/zero", ["run", "--dataset", "/dev/zero"], {}, "dataset '/dev/zero' is a character device"),
    ("a trace that is a pipe", ["run", "--workload", "trace:{d}/pipe.csv"], {}, f"trace '{{d}}/pipe.csv' {NAMED_PIPE}"),
    ("a trace that is /dev/zero", ["run", "--workload", "trace:/dev/zero"], {}, "'/dev/zero' is a character device"),
    (
        "bench: a trace that is a pipe",
        ["bench", "http://127.0.0.1:9", "--workload", "trace:{d}/pipe.csv"],
        {},
        NAMED_PIPE,
    ),
    ("a model that is a pipe", ["run", "--model", "{d}/pipe.gguf"], {}, f"--model '{{d}}/pipe.gguf' {NAMED_PIPE}"),
    (
        "plan: a model that is a pipe",
        ["plan", "--model", "{d}/pipe.gguf"],
        {},
        f"--model '{{d}}/pipe.gguf' {NAMED_PIPE}",
    ),
    (
        "reference prompts that are a pipe",
        ["run", "--set", "fidelity_prompts={d}/pipe.json"],
        {},
        f"fidelity_prompts: '{{d}}/pipe.json' {NAMED_PIPE}",
    ),
    # -- a place to write that is no regular file: a pipe blocks the write, a device is replaced or chmod-ed --
    ("report: an output that is a pipe", ["report", "ok", "-o", "{d}/out.pipe"], {}, f"'{{d}}/out.pipe' {NAMED_PIPE}"),
    ("report: an output that is /dev/null", ["report", "ok", "-o", "/dev/null"], {}, "is a character device"),
    ("bench: results saved to a pipe", ["bench", "http://127.0.0.1:9", "--save", "{d}/out.pipe"], {}, NAMED_PIPE),
    ("compare: an output that is a pipe", ["compare", "ok", "ok2", "-o", "{d}/out.pipe"], {}, NAMED_PIPE),
    (
        "export-workers: a job file that is a pipe",
        [*XW, "-o", "{d}/out.pipe"],
        {},
        f"--output {{d}}/out.pipe {NAMED_PIPE}",
    ),
    (
        "export-workers: an env file that is a pipe",
        [*XW, "-o", "{d}/w.sbatch", "--env-file", "{d}/out.pipe"],
        {},
        f"--env-file {{d}}/out.pipe {NAMED_PIPE}",
    ),
    # -- a name longer than a file system takes: pathlib's exists() raised 'File name too long' (readable.py) --
    ("a model's name too long", ["run", "--model", f"{{d}}/{LONG}.gguf"], {}, "has a name of 305 bytes"),
    ("plan: a model's name too long", ["plan", "--model", f"{{d}}/{LONG}"], {}, "--model '{d}/n"),
    ("report: an output's name too long", ["report", "ok", "-o", f"{{d}}/{LONG}.html"], {}, "--output '{d}/n"),
    ("show from a SQLite name too long", ["show", "s", "--storage", f"sqlite:///{{d}}/{LONG}"], {}, "a name of 300"),
    ("a study file's name too long", ["run", "--study-file", f"{{d}}/{LONG}"], {}, "study file '{d}/nnn"),
    ("a llama-server's name too long", ["run", "--set", f"llama_server={{d}}/{LONG}"], {}, "llama_server '{d}/n"),
    ("show: a study argument too long", ["show", f"{{d}}/{LONG}"], {}, "the study '{d}/nnn"),
    ("show: a runs folder too long", ["show", "ok", "--runs-dir", f"{{d}}/{LONG}"], {}, "--runs-dir '{d}/nnn"),
    ("a study name too long", ["run", "--study", LONG], {}, "is 300 characters: a study name is 255 at most"),
    # -- a results.json that is not of kvtune's shape (study/results_file.py) --
    ("show: results.json is a list", ["show", "a-list"], {}, f"{NOT_RESULTS}: it holds a list, not a JSON object"),
    ("show: results.json is {}", ["show", "empty-object"], {}, f"{NOT_RESULTS}: it has no 'study'"),
    ("show: trials as a string", ["show", "trials-string"], {}, "'trials' is a string 'x', not a list"),
    ("show: a trial's number in words", ["show", "number-words"], {}, "trials[0]: 'number' is a string 'zero'"),
    ("report: a trial's metrics as a string", ["report", "metrics-string"], {}, "trials[0]: 'metrics' is a string"),
    ("export: the spec as a string", ["export", "spec-string"], {}, "'spec' is a string 'x', not an object"),
    ("show: targets as a number", ["show", "targets-number"], {}, "'targets' is a number 5, not a list"),
    ("show: results.json in UTF-16", ["show", "utf16"], {}, "results.json is not UTF-8 text (byte 0xff at offset 0)"),
    (
        "compare: one results.json of another shape",
        ["compare", "ok", "a-list"],
        {},
        f"a-list/results.json {NOT_RESULTS}",
    ),
    (
        "compare: an output under a file",
        ["compare", "ok", "ok2", "-o", "{d}/huge.csv/c.json"],
        {},
        "--output '{d}/huge.csv/c.json' cannot be written: {d}/huge.csv is a file",
    ),
    (
        "compare: a report that is a folder",
        ["compare", "ok", "ok2", "--report", "{d}"],
        {},
        "--report '{d}' is a folder",
    ),
    (
        "report: a compare.json that is a list",
        ["report", "cmp-list"],
        {},
        'compare.json is not a compare.json kvtune wrote: it needs "studies", a list of study names',
    ),
    ("report: a compare.json naming studies by number", ["report", "cmp-numbers"], {}, "a list of study names"),
    # -- an HF model folder's config.json (planner/shape.py) --
    (
        "plan: a config.json with an infinite layer count",
        ["plan", "--model", "{d}/hf-inf"],
        {},
        "config.json gives num_hidden_layers inf: expected a whole number of at least 1",
    ),
    (
        "plan: a config.json with sizes in words",
        ["plan", "--model", "{d}/hf-words"],
        {},
        "config.json gives num_hidden_layers 'x': expected a whole number",
    ),
    ("plan: a config.json with no heads", ["plan", "--model", "{d}/hf-heads0"], {}, "num_attention_heads 0"),
    # -- a trace's token count too large for a float (bench/trace_formats.py) --
    (
        "a trace with 1e400 tokens",
        ["run", "--workload", "trace:{d}/huge.csv"],
        {},
        "expected a token count, got '1e400'",
    ),
    # -- numbers kvtune reads from its environment (kvtune/env_settings.py) --
    (
        "a grace period in words",
        ["show", "ok"],
        {"KVTUNE_GRACE_S": "abc"},
        "KVTUNE_GRACE_S='abc' is not a whole number",
    ),
    ("an empty heartbeat", ["show", "ok"], {"KVTUNE_HEARTBEAT_S": ""}, "KVTUNE_HEARTBEAT_S='' is not a whole number"),
    ("a heartbeat of 0", ["run"], {"KVTUNE_HEARTBEAT_S": "0"}, "KVTUNE_HEARTBEAT_S='0' is not a whole number"),
    (
        "a negative connect timeout",
        ["worker", "--storage", "sqlite:///{d}/w.db", "--study", "s"],
        {"KVTUNE_STORAGE_CONNECT_TIMEOUT_S": "-5"},
        "KVTUNE_STORAGE_CONNECT_TIMEOUT_S='-5' is not a whole number of seconds of at least 1",
    ),
    (
        "a proxy wait of NaN",
        ["show", "ok"],
        {"KVTUNE_PROXY_WAIT_S": "nan"},
        "KVTUNE_PROXY_WAIT_S='nan' is not a number",
    ),
    (
        "a storage retry in words",
        ["show", "ok"],
        {"KVTUNE_STORAGE_RETRY_S": "2min"},
        "KVTUNE_STORAGE_RETRY_S='2min' is not a number of seconds of at least 0",
    ),
    ("help with a bad environment", ["--help"], {"KVTUNE_GRACE_S": "x"}, "KVTUNE_GRACE_S='x'"),
    # -- paths kvtune reads from its environment, set to nothing or under a file --
    ("an empty KVTUNE_LLAMA_SERVER", ["run"], {"KVTUNE_LLAMA_SERVER": ""}, "KVTUNE_LLAMA_SERVER is set but empty"),
    (
        "an empty KVTUNE_VLLM_PYTHON",
        ["run", "--backend", "vllm"],
        {"KVTUNE_VLLM_PYTHON": ""},
        "KVTUNE_VLLM_PYTHON is set but empty",
    ),
    (
        "a model cache under a file",
        ["run"],
        {"KVTUNE_CACHE": "{d}/huge.csv/cache"},
        "KVTUNE_CACHE '{d}/huge.csv/cache/models' would be under {d}/huge.csv, which is a file",
    ),
    ("an empty KVTUNE_RUNS_DIR", ["report", "s"], {"KVTUNE_RUNS_DIR": ""}, "KVTUNE_RUNS_DIR is set but empty"),
    ("a blank KVTUNE_RUNS_DIR", ["run"], {"KVTUNE_RUNS_DIR": " "}, "KVTUNE_RUNS_DIR is set but empty"),
    (
        "a blank KVTUNE_STORAGE",
        ["worker", "--study", "s"],
        {"KVTUNE_STORAGE": " "},
        "KVTUNE_STORAGE must be a storage URL (postgresql://..., grpc://HOST:PORT, sqlite:///PATH), got ' '",
    ),
    # -- a SQLite storage that is no Optuna study database (tuner/store/storage.py) --
    (
        "setting up a study in another program's database",
        ["run", "--setup-only", "--storage", "sqlite:///{d}/app.db"],
        {},
        "app.db is the database of another program (its tables: users), not an Optuna study's",
    ),
    ("a run in another program's database", ["run", "--storage", "sqlite:///{d}/app.db"], {}, "another program"),
    ("show from another program's database", ["show", "s", "--storage", "sqlite:///{d}/app.db"], {}, "another program"),
    ("show from a text file as SQLite", ["show", "s", "--storage", "sqlite:///{d}/notes.db"], {}, "is not a SQLite"),
    ("show from an empty SQLite file", ["show", "s", "--storage", "sqlite:///{d}/empty.db"], {}, "empty.db is empty"),
    ("a proxy for another program's database", ["proxy", "--storage", "sqlite:///{d}/app.db"], {}, "another program"),
    # -- an Optuna study of another program, or a stored spec kvtune did not write (study/spec.py) --
    (
        "a worker on a study whose spec is a string",
        ["worker", "--study", "spec-string", "--storage", "sqlite:///{d}/optuna.db"],
        {},
        "the study's stored spec is str, not a mapping",
    ),
    (
        "show a study whose stored backend is a number",
        ["show", "spec-typed", "--storage", "sqlite:///{d}/optuna.db"],
        {},
        "the study's stored spec is not one kvtune wrote: 'backend' is a number 5, not a string",
    ),
    (
        "a warm start from another program's Optuna study",
        ["run", "--set", "warm_start=plain", "--storage", "sqlite:///{d}/optuna.db", "--study", "new"],
        {},
        "warm_start 'plain' was not created by kvtune (no stored spec)",
    ),
    # -- a database port that is no TCP port: bad input (2), not a storage that is down (75) --
    ("show from port 99999", ["show", "s", "--storage", PG_AT.format("99999")], {}, "port 99999 is not a TCP port"),
    ("a worker on port 0", ["worker", "--study", "s", "--storage", PG_AT.format("0")], {}, "port 0 is not a TCP port"),
    ("a proxy on port 99999", ["proxy", "--storage", PG_AT.format("99999")], {}, "port 99999 is not a TCP port"),
    ("show from a port in words", ["show", "s", "--storage", PG_AT.format("pg")], {}, "port 'pg' is not a TCP port"),
]

#: The shape kvtune writes, the least of it: a study with one trial, the defaults.
RESULTS = {
    "study": "ok",
    "spec": {"study": "ok"},
    "targets": [],
    "baseline_trial": 0,
    "best_trial": None,
    "trials": [{"number": 0, "candidate": {"flags": {}, "env": {}}, "argv": [], "env": {}, "baseline": True}],
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-files")
    for name in ("pipe.yaml", "pipe.json", "pipe.csv", "pipe.gguf", "out.pipe"):
        os.mkfifo(d / name)
    runs = d / "runs"
    shapes = {
        "ok": RESULTS,
        "ok2": {**RESULTS, "study": "ok2"},
        "a-list": [1, 2],
        "empty-object": {},
        "trials-string": {**RESULTS, "trials": "x"},
        "number-words": {**RESULTS, "trials": [{**RESULTS["trials"][0], "number": "zero"}]},
        "metrics-string": {**RESULTS, "trials": [{**RESULTS["trials"][0], "metrics": "fast"}]},
        "spec-string": {**RESULTS, "spec": "x"},
        "targets-number": {**RESULTS, "targets": 5},
    }
    for name, data in shapes.items():
        (runs / name).mkdir(parents=True)
        (runs / name / "results.json").write_text(json.dumps(data))
    for name, data in (("cmp-list", [1]), ("cmp-numbers", {"studies": [1, 2]})):  # comparisons (no results.json)
        (runs / name).mkdir()
        (runs / name / "compare.json").write_text(json.dumps(data))
    (runs / "utf16").mkdir()
    (runs / "utf16" / "results.json").write_bytes(json.dumps(RESULTS).encode("utf-16"))
    configs = {
        "hf-inf": '{"model_type": "llama", "num_hidden_layers": 1e999, "num_attention_heads": 8}',
        "hf-words": '{"model_type": "llama", "num_hidden_layers": "x", "num_attention_heads": 8}',
        "hf-heads0": '{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 0, "hidden_size": 64}',
    }
    for name, text in configs.items():
        (d / name).mkdir()
        (d / name / "config.json").write_text(text)
    with sqlite3.connect(d / "app.db") as db:
        db.execute("CREATE TABLE users (name TEXT)")
    optuna_db = f"sqlite:///{d / 'optuna.db'}"
    optuna.create_study(study_name="plain", storage=optuna_db)
    optuna.create_study(study_name="spec-string", storage=optuna_db).set_user_attr("spec", "garbage")
    optuna.create_study(study_name="spec-typed", storage=optuna_db).set_user_attr("spec", {"backend": 5})
    (d / "notes.db").write_text("not a database\n")
    (d / "empty.db").write_bytes(b"")
    (d / "utf16.yaml").write_bytes("study: s\ntrials: 3\n".encode("utf-16"))
    (d / "huge.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,1e400\n")
    (d / "help.txt").write_text((UNIT_DATA / "llama_server_help.txt").read_text())
    server = d / "llama-server"
    server.write_text(
        f'#!/bin/sh\necho "$@" >> {d}/calls.log\ncase "$*" in *--help*) cat {d}/help.txt; exit 0;; '
        "*--version*|*--list-devices*) exit 0;; esac\nsleep 30\n"
    )
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    return d


def test_the_well_formed_results_read(inputs, tmp_path):
    """The least results.json the rows alter is one `show` reads: the rows fail on what they change."""
    env = {**os.environ, "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server"), "COLUMNS": "400"}
    r = kvtune(["show", "ok", "--runs-dir", str(inputs / "runs")], tmp_path, env)
    assert r.returncode == 0 and "1 trials" in r.stdout, r.stderr


def test_nan_and_infinity_in_results_read_as_null(inputs, tmp_path):
    """NaN and Infinity, which kvtune never writes, read as the null it writes for them."""
    d = tmp_path / "runs" / "nan"
    d.mkdir(parents=True)
    trial = {**RESULTS["trials"][0], "metrics": {"output_throughput": "NAN", "p95_ttft_ms": "INF"}}
    text = json.dumps({**RESULTS, "trials": [trial]}).replace('"NAN"', "NaN").replace('"INF"', "1e999")
    (d / "results.json").write_text(text)
    env = {**os.environ, "COLUMNS": "400"}
    r = kvtune(["show", "nan", "--runs-dir", str(tmp_path / "runs")], tmp_path, env)
    assert r.returncode == 0 and "nan" not in r.stdout.lower() and "inf " not in r.stdout, (r.stdout, r.stderr)


@pytest.mark.parametrize("what,argv,extra_env,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_each_bad_file_is_one_line_exit_2_and_nothing_started(inputs, tmp_path, what, argv, extra_env, phrase):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (inputs / "calls.log").unlink(missing_ok=True)
    before = listing(inputs)
    args = [a.replace("{d}", str(inputs)) for a in argv]
    if args[0] in ("run", "worker") and "KVTUNE_RUNS_DIR" not in extra_env:  # a row of it: no flag over it
        args[1:1] = ["--runs-dir", str(tmp_path / "runs")]
    if args[0] in ("show", "report", "export", "compare") and "KVTUNE_RUNS_DIR" not in extra_env:
        args[1:1] = ["--runs-dir", str(inputs / "runs")]
    if args[0] in ("report", "export") and "-o" not in args:
        args += ["-o", str(cwd / "out")]  # never written: the refusal comes first
    extra_env = {k: v.replace("{d}", str(inputs)) for k, v in extra_env.items()}
    base = {k: v for k, v in os.environ.items() if k not in ("KVTUNE_STORAGE", "KVTUNE_RUNS_DIR")}
    env = {**base, "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server"), "COLUMNS": "400", **extra_env}
    r = kvtune(args, cwd, env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (what, r.returncode, r.stdout, r.stderr)
    phrase = phrase.replace("{d}", str(inputs))
    assert len(lines) == 1 and lines[0].startswith("kvtune: error: ") and phrase in lines[0], (what, r.stderr)
    assert "***ort" not in r.stderr, f"{what}: the password was masked inside a word"
    assert not r.stdout.strip(), f"{what}: printed before the refusal: {r.stdout}"
    assert not (tmp_path / "runs").exists(), f"{what}: a runs folder was written"
    assert not list(cwd.iterdir()), f"{what}: written in the current folder: {list(cwd.iterdir())}"
    assert listing(inputs) == before, f"{what}: written beside the inputs"
    calls = (inputs / "calls.log").read_text().splitlines() if (inputs / "calls.log").exists() else []
    assert all(any(q in c for q in QUERIES) for c in calls), f"{what}: a server was started: {calls}"
