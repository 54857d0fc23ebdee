"""Bad input costs a second, never a launch (issue 29): a table of what a careful user would
mistype, on every command. Each row: the argv after `kvtune`, the exit status (2 bad input; 75 a
storage that does not answer, which a scheduler retries) and a phrase the error must contain
(`{d}` in it too: a path refused is named as it was typed, flag or key, with its path).
Every row must print exactly one line on stderr, `kvtune: error: ...` (typer's "Usage:" box never
shows), mask the storage's password, write nothing (no runs folder, no study database, nothing
in the current folder or beside the inputs) and start no server: the llama-server kvtune finds is
a script that logs every call (a `--help`, `--version` or `--list-devices` query is allowed; anything
else would be a server launch). `{d}`: the inputs folder; `{port}`: a local port nothing listens on;
`kv` in `{d}/db/s.db`: a study `kvtune run --setup-only` set up (a worker joining it starts servers).
`kvtune plan` and `kvtune export-workers` have tables of their own (test_bad_input_plan.py,
test_bad_input_cluster.py); here each has its usage errors.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from kvtune.launchers.process import free_port
from tests.paths import UNIT_DATA

BAD, RETRY = 2, 75
PG = "postgresql://nobody:secret@127.0.0.1:{port}/kvtune"  # "secret" must never be printed
GRPC = "grpc://127.0.0.1:{port}"
URL = "http://127.0.0.1:{port}"  # `kvtune bench`'s server: refused before any request is sent
W = ["worker", "--storage", "sqlite:///{d}/w.db", "--study", "s"]  # a worker's storage that is not there
KV = ["--storage", "sqlite:///{d}/db/s.db", "--study", "kv"]  # a study set up for workers, none ran yet
XW = ["export-workers", "-f", "slurm", "--storage", "sqlite:///{d}/w.db", "--study", "s", "--workers", "2"]

ROWS: list[tuple[str, list[str], int, str]] = [
    # what the user gave                         argv after `kvtune`                       exit  phrase
    # -- the command line itself (typer's parsing, every command) --
    ("a command mistyped", ["rn"], BAD, "no such command 'rn'; did you mean 'run'?"),
    ("--version mistyped", ["--verison"], BAD, "no such option --verison; did you mean --version?"),
    ("run: an option mistyped", ["run", "--trails", "3"], BAD, "no such option --trails; did you mean --trials"),
    ("run: trials in words", ["run", "--trials", "ten"], BAD, "--trials takes a whole number, got 'ten'"),
    (
        "run: a fraction of a user",
        ["run", "--concurrency", "1.5"],
        BAD,
        "--concurrency takes a whole number, got '1.5'",
    ),
    ("run: an option without its value", ["run", "--target"], BAD, "kvtune run: option --target requires an argument"),
    ("run: a value given to a switch", ["run", "--setup-only=yes"], BAD, "option --setup-only does not take a value"),
    ("run: a stray argument", ["run", "ttft<1s"], BAD, "kvtune run: got unexpected extra argument"),
    ("run: a seed in words", ["run", "--set", "seed=x"], BAD, "seed must be an integer, got 'x'"),
    ("run: workers in words", ["run", "--workers", "two"], BAD, "--workers takes a whole number, got 'two'"),
    ("bench: no URL", ["bench"], BAD, "kvtune bench: missing argument"),
    ("bench: a rate in words", ["bench", URL, "--rate", "fast"], BAD, "--rate takes a number, got 'fast'"),
    ("bench: an option mistyped", ["bench", URL, "--concurreny", "4"], BAD, "did you mean --concurrency?"),
    (
        "bench: an unknown arrival",
        ["bench", URL, "--set", "workload.arrival=sometimes"],
        BAD,
        "must be one of poisson, gamma",
    ),
    ("bench: no requests", ["bench", URL, "--num-requests", "0"], BAD, "--num-requests must be at least 1"),
    ("bench: an SLO without a unit", ["bench", URL, "--slo", "ttft<2"], BAD, "SLO 'ttft<2' needs a time unit"),
    (
        "bench: an attainment target without an SLO",
        ["bench", URL, "--target", "slo_attainment>99%"],
        BAD,
        "needs per-request SLOs to measure: add --slo",
    ),
    ("worker: no storage", ["worker", "--study", "s"], BAD, "missing option --storage; give it, or set KVTUNE_STORAGE"),
    ("worker: no study", ["worker", "--storage", "sqlite:///{d}/w.db"], BAD, "kvtune worker: missing option --study"),
    ("worker: slots in words", [*W, "--slots", "two"], BAD, "--slots takes a whole number, got 'two'"),
    ("worker: an option mistyped", [*W, "--gpus-per-trail", "1"], BAD, "did you mean --gpus-per-trial?"),
    ("plan: a context in words", ["plan", "--context", "long"], BAD, "--context takes a whole number, got 'long'"),
    ("plan: an option mistyped", ["plan", "--usres", "4"], BAD, "no such option --usres; did you mean --users"),
    ("doctor: an option it does not have", ["doctor", "--json"], BAD, "kvtune doctor: no such option --json"),
    ("doctor: a path left out", ["doctor", "--llama-server"], BAD, "option --llama-server requires an argument"),
    ("show: no study", ["show"], BAD, "kvtune show: missing argument"),
    ("show: --storage mistyped", ["show", "s", "--storge", "x"], BAD, "did you mean --storage?"),
    ("show: two studies", ["show", "a", "b"], BAD, "kvtune show: got unexpected extra argument"),
    ("report: no study", ["report"], BAD, "kvtune report: missing argument"),
    ("report: an output left out", ["report", "s", "--output"], BAD, "option --output requires an argument"),
    ("export: a trial by name", ["export", "s", "--trial", "best"], BAD, "--trial takes a whole number, got 'best'"),
    (
        "export: a format it does not write",
        ["export", "s", "--format", "docker"],
        BAD,
        "unknown export format 'docker'",
    ),
    ("export: port 0", ["export", "s", "--port", "0"], BAD, "--port must be a TCP port, 1..65535, got 0"),
    ("export: port 70000", ["export", "s", "--port", "70000"], BAD, "--port must be a TCP port, 1..65535, got 70000"),
    ("export-workers: no storage", ["export-workers", "-f", "slurm"], BAD, "missing option --storage; give it, or set"),
    ("export-workers: workers in words", [*XW, "--workers", "many"], BAD, "--workers takes a whole number, got 'many'"),
    ("compare: no studies", ["compare"], BAD, "kvtune compare: missing argument"),
    ("compare: an option mistyped", ["compare", "a", "b", "--reprot"], BAD, "did you mean --report?"),
    ("proxy: no storage", ["proxy"], BAD, "kvtune proxy: missing option --storage"),
    ("proxy: a port in words", ["proxy", "--storage", "sqlite:///{d}/p.db", "--port", "http"], BAD, "got 'http'"),
    ("proxy: port 70000", ["proxy", "--storage", "sqlite:///{d}/p.db", "--port", "70000"], BAD, "1..65535"),
    # -- what the flags say (kvtune's own checks) --
    ("empty trace", ["run", "--workload", "trace:{d}/empty.csv"], BAD, "is empty"),
    ("trace of unknown format", ["run", "--workload", "trace:{d}/bad.csv"], BAD, "unknown format"),
    ("a shipped trace's name mistyped", ["run", "--workload", "trace:azure-conf"], BAD, "shipped traces: azure-conv"),
    ("a trace that is not there", ["run", "--workload", "trace:{d}/nope.csv"], BAD, "does not exist"),
    (
        "capacity on a trace at a fixed speed",
        [
            "run",
            "--workload",
            "trace:azure-conv",
            "--objective",
            "capacity",
            "--target",
            "ttft_p95<5s",
            "--set",
            "workload.trace_speed=2",
        ],
        BAD,
        "searches the replay speed itself (from 1x, reported as a multiple of the recorded rate): drop workload.trace_speed 2",
    ),
    ("--workload of another kind", ["run", "--workload", "tracefile.csv"], BAD, "--workload takes multiturn or trace:"),
    ("a dataset that is not there", ["run", "--dataset", "{d}/nope.json"], BAD, "does not exist"),
    ("a dataset without prompts", ["run", "--dataset", "{d}/no-prompts.json"], BAD, "has no prompts"),
    (
        "conversations without human turns",
        ["run", "--dataset", "{d}/no-prompts.json", "--workload", "multiturn"],
        BAD,
        "has no conversations",
    ),
    ("a study file that is not there", ["run", "--study-file", "{d}/nope.yaml"], BAD, "does not exist"),
    ("a study file naming a missing trace", ["run", "--study-file", "{d}/missing-trace.yaml"], BAD, "does not exist"),
    ("a target that does not parse", ["run", "--target", "ttft<<1s"], BAD, "cannot parse target"),
    ("no trials", ["run", "--trials", "0"], BAD, "trials must be at least 1"),
    (
        "one confirmation pair",
        ["run", "--set", "confirm_pairs=1"],
        BAD,
        "confirm_pairs must be a whole number of at least 2",
    ),
    ("port 0", ["run", "--set", "deploy_port=0"], BAD, "deploy_port must be a TCP port"),
    ("port 70000", ["run", "--set", "deploy_port=70000"], BAD, "deploy_port must be a TCP port"),
    ("no users", ["run", "--concurrency", "0"], BAD, "concurrency must be at least 1"),
    ("no workers", ["run", "--workers", "0"], BAD, "--workers must be at least 1"),
    ("a time budget that is no duration", ["run", "--time-budget", "banana"], BAD, "is not a duration"),
    ("an unknown backend", ["run", "--backend", "nope"], BAD, "unknown backend"),
    ("a model that is not there", ["run", "--model", "{d}/nope.gguf"], BAD, "error: --model '{d}/nope.gguf' does not"),
    (
        "a model by --set not there",
        ["run", "--set", "model={d}/nope.gguf"],
        BAD,
        "error: model '{d}/nope.gguf' does not",
    ),
    ("an unknown objective", ["run", "--objective", "nope"], BAD, "unknown objective"),
    ("an unknown sampler", ["run", "--set", "sampler=nope"], BAD, "unknown sampler"),
    ("negative repeats", ["run", "--set", "repeats=-1"], BAD, "repeats must be"),
    (
        "repeats in words",
        ["run", "--set", "repeats=abc"],
        BAD,
        "repeats must be a whole number of at least 1 or 'auto', got 'abc'",
    ),
    (
        "setting up a study with a missing trace",
        ["run", "--setup-only", "--storage", "sqlite:///{d}/s.db", "--workload", "trace:{d}/nope.csv"],
        BAD,
        "does not exist",
    ),
    # -- the study file's space: checked against the build's --help (the fake prints the recorded one) --
    (
        "a vLLM flag given to llama-server",
        ["run", "--study-file", "{d}/vllm-flag.yaml"],
        BAD,
        "space.max-num-seqs: llama-server has no --max-num-seqs",
    ),
    ("a flag mistyped", ["run", "--study-file", "{d}/typo-flag.yaml"], BAD, "did you mean ubatch-size?"),
    ("a choice the flag lacks", ["run", "--study-file", "{d}/maybe.yaml"], BAD, "'maybe' is not a choice"),
    ("on/off unquoted in YAML", ["run", "--study-file", "{d}/unquoted-on.yaml"], BAD, 'quote it, e.g. "on"'),
    ("a number flag given words", ["run", "--study-file", "{d}/words.yaml"], BAD, "'many' is not a number"),
    ("no slots", ["run", "--study-file", "{d}/parallel0.yaml"], BAD, "space.parallel: 0 is out of range"),
    ("negative threads", ["run", "--study-file", "{d}/threads-neg.yaml"], BAD, "space.threads: -2 is out of range"),
    ("a fraction of a slot", ["run", "--study-file", "{d}/parallel-half.yaml"], BAD, "1.5 is not a whole number"),
    # -- the study file's other keys --
    ("a study file's unknown key", ["run", "--study-file", "{d}/unknown-key.yaml"], BAD, "unknown key(s) ['bogus']"),
    ("a workload's unknown key", ["run", "--study-file", "{d}/workload-key.yaml"], BAD, "workload has unknown key"),
    ("a study file that is no YAML", ["run", "--study-file", "{d}/broken.yaml"], BAD, "is not valid YAML at line"),
    ("a study file that is a list", ["run", "--study-file", "{d}/a-list.yaml"], BAD, "must be a mapping of keys"),
    ("a study file's target", ["run", "--study-file", "{d}/target.yaml"], BAD, "targets: cannot parse target"),
    ("a study file's trials", ["run", "--study-file", "{d}/trials0.yaml"], BAD, "trials must be at least 1"),
    ("a study file's backend", ["run", "--study-file", "{d}/backend.yaml"], BAD, "unknown backend 'nope'"),
    ("a study file's model", ["run", "--study-file", "{d}/model.yaml"], BAD, "error: model '{d}/nope.gguf' does not"),
    ("a study file's llama-server", ["run", "--study-file", "{d}/binary.yaml"], BAD, "which is not an executable file"),
    (
        "a study file's draft model",
        ["run", "--study-file", "{d}/draft.yaml"],
        BAD,
        "error: draft_model '{d}/nope.gguf'",
    ),
    ("a study file's time budget", ["run", "--study-file", "{d}/budget.yaml"], BAD, "'banana' is not a duration"),
    ("a study file's SLO", ["run", "--study-file", "{d}/slo.yaml"], BAD, "slo must be per-request SLOs"),
    ("a study file's seed", ["run", "--study-file", "{d}/seed.yaml"], BAD, "seed must be an integer, got 'x'"),
    ("a study file's objective", ["run", "--study-file", "{d}/objective.yaml"], BAD, "unknown objective 'nope'"),
    ("a study file's users", ["run", "--study-file", "{d}/users0.yaml"], BAD, "concurrency must be at least 1"),
    ("a study file's confirmation", ["run", "--study-file", "{d}/confirm.yaml"], BAD, "confirm_top must be 0 or more"),
    # -- drawn workloads --
    (
        "think times drawn around none",
        ["run", "--workload", "multiturn", "--set", "workload.think_spread=0.5"],
        BAD,
        "draws think times around think_time_s, which is 0",
    ),
    (
        "think times without turns",
        ["run", "--set", "workload.think_spread=0.5"],
        BAD,
        "workload.think_spread applies to multi-turn only",
    ),
    (
        "no prefix groups",
        ["run", "--set", "workload.shared_prefix_groups=0"],
        BAD,
        "workload.shared_prefix_groups must be an integer >= 1",
    ),
    (
        "prefix groups of nothing shared",
        ["run", "--set", "workload.shared_prefix_groups=2"],
        BAD,
        "set workload.shared_prefix_fraction > 0",
    ),
    # -- paths and durations on the command line --
    ("a llama-server that is not there", ["run", "--set", "llama_server={d}/nope"], BAD, "which is not an executable"),
    ("a draft model that is not there", ["run", "--set", "draft_model={d}/nope.gguf"], BAD, "error: draft_model '{d}/"),
    (
        "a vLLM Python that is not there",
        ["run", "--backend", "vllm", "--set", "vllm_python={d}/nope"],
        BAD,
        "error: vllm_python points to '{d}/nope', which has no usable vLLM (cannot run",
    ),
    (
        "a start-up timeout in words",
        ["run", "--set", "startup_timeout_s=x"],
        BAD,
        "startup_timeout_s 'x' is not a duration",
    ),
    (
        "a negative start-up timeout",
        ["run", "--set", "startup_timeout_s=-5"],
        BAD,
        "startup_timeout_s -5 must be more than zero",
    ),
    ("a warm start from no study", ["run", "--set", "warm_start=nosuch"], BAD, "no study 'nosuch'"),
    (
        "a set-up warm-started from no study",
        ["run", "--setup-only", "--storage", "sqlite:///{d}/db/s.db", "--set", "warm_start=nosuch"],
        BAD,
        "no study 'nosuch'",
    ),
    # -- kvtune bench: local files read before the server is asked anything (nothing listens here) --
    ("bench: a dataset that is not there", ["bench", URL, "--dataset", "{d}/nope.json"], BAD, "does not exist"),
    ("bench: a tokenizer that is not there", ["bench", URL, "--tokenizer", "{d}/nope.gguf"], BAD, "does not exist"),
    ("bench: a trace that is not there", ["bench", URL, "--workload", "trace:{d}/nope.csv"], BAD, "does not exist"),
    # -- kvtune confirm: the study and its storage --
    (
        "confirm: no study",
        ["confirm", "--storage", "sqlite:///{d}/w.db"],
        BAD,
        "kvtune confirm: missing option --study",
    ),
    (
        "confirm: a SQLite file that is not there",
        ["confirm", "--storage", "sqlite:///{d}/w.db", "--study", "s"],
        BAD,
        "w.db does not exist",
    ),
    ("confirm: a PostgreSQL that is down", ["confirm", "--storage", PG, "--study", "s"], RETRY, "is unreachable"),
    (
        "confirm: an option mistyped",
        ["confirm", "--storage", PG, "--study", "s", "--gpus-per-trail", "1"],
        BAD,
        "did you mean --gpus-per-trial?",
    ),
    ("show: an empty study name", ["show", ""], BAD, "the study name is empty"),
    ("report: an empty study name", ["report", ""], BAD, "the study name is empty"),
    # -- names and placement --
    ("an empty study name", ["run", "--study", ""], BAD, "--study is empty: give a study name"),
    ("a study name that is not one", ["run", "--study", "../up"], BAD, "--study '../up' is not a study name"),
    ("a study name with a slash", ["run", "--study", "a/b"], BAD, "--study 'a/b' is not a study name"),
    ("a study name that climbs", ["run", "--study", ".."], BAD, "--study '..' is not a study name"),
    ("CPUs per trial without a set-up", ["run", "--set", "cpus_per_trial=2"], BAD, "add --setup-only"),
    (
        "no CPUs per trial",
        ["run", "--setup-only", "--storage", "sqlite:///{d}/s.db", "--set", "cpus_per_trial=0"],
        BAD,
        "cpus_per_trial must be at least 1",
    ),
    ("a worker with no slots", [*W, "--slots", "0"], BAD, "--slots must be at least 1"),
    ("a worker's slot past its slots", [*W, "--slot", "2", "--slots", "2"], BAD, "--slot must be in 0..1, got 2"),
    ("a worker's negative slot", [*W, "--slot", "-1"], BAD, "--slot must be in 0..0, got -1"),
    ("a worker with negative GPUs", [*W, "--gpus-per-trial", "-1"], BAD, "--gpus-per-trial must be 0 or more"),
    ("a worker for no study", ["worker", "--storage", "sqlite:///{d}/w.db", "--study", ""], BAD, "--study must name"),
    (
        "a worker for a study name on two lines",
        ["worker", "--storage", "sqlite:///{d}/db/s.db", "--study", "a\nb"],
        BAD,
        "no study 'a\\nb'",  # the refusal quotes it on one line, the newline escaped
    ),
    # -- this host's llama-server, a flag of worker and confirm: named by the flag, not the study's key --
    (
        "a worker's llama-server that is not there",
        ["worker", *KV, "--llama-server", "{d}/nope"],
        BAD,
        "error: --llama-server points to '{d}/nope', which is not an executable file",
    ),
    (
        "a worker's llama-server that is a folder",
        ["worker", *KV, "--llama-server", "{d}"],
        BAD,
        "error: --llama-server points to '{d}', which is not an executable file",
    ),
    ("a worker's empty llama-server", ["worker", *KV, "--llama-server", ""], BAD, "error: --llama-server is empty"),
    (
        "a worker's llama-server that is a text file",
        ["worker", *KV, "--llama-server", "{d}/help.txt"],
        BAD,
        "error: --llama-server points to '{d}/help.txt', which is not an executable file",
    ),
    (
        "a worker's llama-server that is another program",
        ["worker", *KV, "--llama-server", "/bin/true"],
        BAD,
        "error: --llama-server points to '/bin/true', which is not llama-server: `true --help` lists no --port",
    ),
    (
        "confirm: a llama-server that is not there",
        ["confirm", *KV, "--llama-server", "{d}/nope"],
        BAD,
        "error: --llama-server points to '{d}/nope', which is not an executable file",
    ),
    ("confirm: an empty llama-server", ["confirm", *KV, "--llama-server", ""], BAD, "error: --llama-server is empty"),
    (
        "confirm: negative GPUs",
        ["confirm", *KV, "--gpus-per-trial", "-1"],
        BAD,
        "--gpus-per-trial must be 0 or more, got -1",
    ),
    (
        "confirm: a llama-server that is another program",
        ["confirm", *KV, "--llama-server", "/bin/true"],
        BAD,
        "error: --llama-server points to '/bin/true', which is not llama-server: `true --help` lists no --port",
    ),
    # -- this host's vLLM Python, a flag of worker and confirm: named by the flag, checked before the storage --
    (
        "a worker's vLLM Python that is not there",
        ["worker", *KV, "--vllm-python", "{d}/nope"],
        BAD,
        "error: --vllm-python points to '{d}/nope', which has no usable vLLM (cannot run",
    ),
    (
        "a worker's vLLM Python that is a folder",
        ["worker", *KV, "--vllm-python", "{d}"],
        BAD,
        "error: --vllm-python points to '{d}', which has no usable vLLM (cannot run",
    ),
    ("a worker's empty vLLM Python", ["worker", *KV, "--vllm-python", ""], BAD, "error: --vllm-python is empty"),
    (
        "a worker's vLLM Python that is a text file",
        ["worker", *KV, "--vllm-python", "{d}/help.txt"],
        BAD,
        "error: --vllm-python points to '{d}/help.txt', which has no usable vLLM (cannot run",
    ),
    (
        "a worker's vLLM Python that is another program",
        ["worker", *KV, "--vllm-python", "/bin/true"],
        BAD,
        "error: --vllm-python points to '/bin/true', which has no usable vLLM",
    ),
    (
        "confirm: a vLLM Python that is not there",
        ["confirm", *KV, "--vllm-python", "{d}/nope"],
        BAD,
        "error: --vllm-python points to '{d}/nope', which has no usable vLLM (cannot run",
    ),
    ("confirm: an empty vLLM Python", ["confirm", *KV, "--vllm-python", ""], BAD, "error: --vllm-python is empty"),
    # -- storages: a SQLite file that is not there is created by nobody --
    ("a worker's SQLite file that is not there", W, BAD, "w.db does not exist"),
    (
        "show from a SQLite file that is not there",
        ["show", "s", "--storage", "sqlite:///{d}/w.db"],
        BAD,
        "does not exist",
    ),
    (
        "report from a SQLite file that is not there",
        ["report", "s", "--storage", "sqlite:///{d}/w.db"],
        BAD,
        "not exist",
    ),
    (
        "export from a SQLite file that is not there",
        ["export", "s", "--storage", "sqlite:///{d}/w.db"],
        BAD,
        "not exist",
    ),
    ("a SQLite storage that is a folder", ["show", "s", "--storage", "sqlite:///{d}"], BAD, "is a folder"),
    (
        "a study that is not in the storage",
        ["worker", "--storage", "sqlite:///{d}/db/s.db", "--study", "x"],
        BAD,
        "no study 'x'",
    ),
    ("a storage URL that does not parse", ["show", "s", "--storage", "postgres//db"], BAD, "cannot open storage"),
    (
        "a storage of an unknown kind",
        ["show", "s", "--storage", "nosuchdb://x"],
        BAD,
        "cannot open storage nosuchdb://x",
    ),
    ("an empty storage URL", ["worker", "--storage", "", "--study", "s"], BAD, "--storage must be a storage URL"),
    ("a proxy URL without a port", ["worker", "--storage", "grpc://db-host", "--study", "s"], BAD, "grpc://HOST:PORT"),
    # -- storages that do not answer: named as unreachable, exit 75 (retry) --
    ("show from a PostgreSQL that is down", ["show", "s", "--storage", PG], RETRY, "postgresql://nobody:***@127.0.0.1"),
    ("report from a PostgreSQL that is down", ["report", "s", "--storage", PG], RETRY, "is unreachable"),
    ("export from a PostgreSQL that is down", ["export", "s", "--storage", PG], RETRY, "is unreachable"),
    ("a worker on a PostgreSQL that is down", ["worker", "--storage", PG, "--study", "s"], RETRY, "is unreachable"),
    ("a run on a PostgreSQL that is down", ["run", "--storage", PG, "--study", "s"], RETRY, "is unreachable"),
    ("a run behind a proxy that is down", ["run", "--storage", GRPC, "--study", "s"], RETRY, "is unreachable"),
    ("setting up a study in a PostgreSQL that is down", ["run", "--setup-only", "--storage", PG], RETRY, "unreachable"),
    ("a proxy in front of a PostgreSQL that is down", ["proxy", "--storage", PG], RETRY, "is unreachable"),
    ("export-workers for a PostgreSQL that is down", [*XW[:3], "--storage", PG, *XW[5:]], RETRY, "is unreachable"),
    ("show through a proxy that is down", ["show", "s", "--storage", GRPC], RETRY, "grpc://127.0.0.1:"),
    ("a worker behind a proxy that is down", ["worker", "--storage", GRPC, "--study", "s"], RETRY, "is unreachable"),
]
#: What kvtune may ask the llama-server it finds without starting a server.
QUERIES = ("--help", "--version", "--list-devices")
#: Commands that take --runs-dir: the suite points it into the test's folder, which must stay empty.
RUNS_DIR_COMMANDS = {"run", "worker", "confirm", "show", "report", "export", "compare", "export-workers"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    return make_inputs(tmp_path_factory.mktemp("bad-input"))


def make_inputs(d: Path) -> Path:
    """The rows' `{d}`: bad traces, datasets and study files, a storage without the study asked
    for, and the llama-server script that logs its calls (benchmarks/bad_input.py uses it too)."""
    (d / "empty.csv").write_text("")
    (d / "bad.csv").write_text("a,b\n1,2\n")
    (d / "no-prompts.json").write_text('{"x": 1}\n')
    (d / "missing-trace.yaml").write_text(f"study: s\nworkload:\n  trace: {d}/nope.csv\n")
    (d / "vllm-flag.yaml").write_text("space:\n  max-num-seqs: [2, 4]\n")
    (d / "typo-flag.yaml").write_text("space:\n  ubatch-sise: [64, 128]\n")
    (d / "maybe.yaml").write_text('space:\n  flash-attn: "maybe"\n')
    (d / "unquoted-on.yaml").write_text("space:\n  flash-attn: [on, off]\n")
    (d / "words.yaml").write_text("space:\n  parallel: [many]\n")
    (d / "parallel0.yaml").write_text("space:\n  parallel: [0]\n")
    (d / "threads-neg.yaml").write_text("space:\n  threads: [-2]\n")
    (d / "parallel-half.yaml").write_text("space:\n  parallel: [1.5]\n")
    study_files = {
        "unknown-key": "bogus: 1",
        "workload-key": "workload:\n  bogus: 1",
        "broken": "space: [",
        "a-list": "- a\n- b",
        "target": 'targets: ["ttft<<1s"]',
        "trials0": "trials: 0",
        "backend": "backend: nope",
        "model": f"model: {d}/nope.gguf",
        "binary": f"llama_server: {d}/nope",
        "draft": f"draft_model: {d}/nope.gguf",
        "budget": "time_budget: banana",
        "slo": 'slo: ["ttft<2"]',
        "seed": "seed: x",
        "objective": "objective: nope",
        "users0": "workload:\n  concurrency: 0",
        "confirm": "confirm_top: -1",
    }
    for name, text in study_files.items():
        (d / f"{name}.yaml").write_text(text + "\n")
    (d / "help.txt").write_text((UNIT_DATA / "llama_server_help.txt").read_text())
    (d / "db").mkdir()
    optuna.create_study(study_name="other", storage=f"sqlite:///{d / 'db' / 's.db'}")  # a storage without study x
    server = d / "llama-server"
    server.write_text(
        f'#!/bin/sh\necho "$@" >> {d}/calls.log\ncase "$*" in *--help*) cat {d}/help.txt; exit 0;; '
        f"*--version*|*--list-devices*) exit 0;; esac\nsleep 30\n"
    )
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    set_up = subprocess.run(  # the rows' `kv`: no server starts, the found one is asked its --help
        [sys.executable, "-m", "kvtune.cli", "run", "--setup-only", *(a.replace("{d}", str(d)) for a in KV)]
        + ["--runs-dir", str(d / "set-up-runs")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=d,
        env={**{k: v for k, v in os.environ.items() if k != "KVTUNE_STORAGE"}, "KVTUNE_LLAMA_SERVER": str(server)},
    )
    assert set_up.returncode == 0, set_up.stderr
    return d


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A local port nothing listens on: the OS just handed it out and it was closed again."""
    return free_port()


def listing(d: Path) -> list[str]:
    """Every file and folder under `d` but the fake server's call log."""
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.name != "calls.log")


def kvtune(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


@pytest.mark.parametrize("what,argv,status,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_one_line_and_nothing_started(inputs, closed_port, tmp_path, what, argv, status, phrase):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (inputs / "calls.log").unlink(missing_ok=True)
    before = listing(inputs)
    args = [a.replace("{d}", str(inputs)).replace("{port}", str(closed_port)) for a in argv]
    if args and args[0] in RUNS_DIR_COMMANDS:  # first, so that an option left without its value stays last
        args[1:1] = ["--runs-dir", str(tmp_path / "runs")]
    env = {
        **os.environ,
        "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server"),
        "KVTUNE_PROXY_WAIT_S": "1",  # a proxy that is down is named in a second, not ten
        "COLUMNS": "400",
    }
    env.pop("KVTUNE_STORAGE", None)
    r = kvtune(args, cwd, env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == status, (what, r.returncode, r.stdout, r.stderr)
    phrase = phrase.replace("{d}", str(inputs))
    assert len(lines) == 1 and lines[0].startswith("kvtune: error: ") and phrase in lines[0], (what, r.stderr)
    assert "secret" not in r.stderr + r.stdout, f"{what}: the storage's password was printed"
    assert not (tmp_path / "runs").exists(), f"{what}: a runs folder was written"
    assert not list(cwd.iterdir()), f"{what}: written in the current folder: {list(cwd.iterdir())}"
    assert listing(inputs) == before, f"{what}: written beside the inputs (a study database?)"
    calls = (inputs / "calls.log").read_text().splitlines() if (inputs / "calls.log").exists() else []
    assert all(any(q in c for q in QUERIES) for c in calls), f"{what}: a server was started: {calls}"


def test_a_worker_takes_its_storage_from_the_environment(closed_port, tmp_path):
    """KVTUNE_STORAGE hands the URL (password included) to `kvtune worker` outside its argv."""
    env = {**os.environ, "KVTUNE_STORAGE": PG.replace("{port}", str(closed_port))}
    r = kvtune(["worker", "--study", "s", "--runs-dir", str(tmp_path / "runs")], tmp_path, env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == RETRY and len(lines) == 1 and "is unreachable" in lines[0], r.stderr
    assert f"127.0.0.1:{closed_port}" in lines[0] and "secret" not in r.stderr
    assert not (tmp_path / "runs").exists()


def test_help_and_version_still_print():
    """The one-line errors leave help alone: `--help` on every level, a bare `kvtune`, `--version`."""
    for args, status in ((["--help"], 0), (["run", "--help"], 0), (["worker", "--help"], 0), ([], 2)):
        r = kvtune(args, Path.cwd(), {**os.environ, "COLUMNS": "200"})
        assert r.returncode == status and "Usage: kvtune" in r.stdout and not r.stderr.strip(), (args, r.stderr)
    r = kvtune(["worker", "--help"], Path.cwd(), {**os.environ, "COLUMNS": "200"})
    assert "KVTUNE_STORAGE" in r.stdout
    r = kvtune(["--version"], Path.cwd(), dict(os.environ))
    assert r.returncode == 0 and r.stdout.startswith("kvtune ")
