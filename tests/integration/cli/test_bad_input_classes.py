"""Every input checked by class (issue 41), in the pattern of test_bad_input.py: a study file that
is not UTF-8 YAML text (a binary file, a GGUF model, over 1 MiB, aliases that expand without
bound or refer to themselves, a key written twice), a GGUF cut short given as a model, places
that cannot be written (a runs folder or an output under a regular file, an output folder that
is not there), empty values that would silently mean a default, a `--llama-server` that is not
llama-server, targets that can never hold, and a flag's value refused under the flag typed, not
the study file's key. Each row: argv after `kvtune`, the phrase of the one line; every row must
exit 2 with exactly one line on stderr, `kvtune: error: ...`, print nothing on stdout (no banner
before the refusal), write nothing (no runs folder, nothing in the current folder or beside the
inputs) and start no server (the llama-server kvtune finds logs its calls; `--help`, `--version`
and `--list-devices` are no launch), in a few seconds. Tests run as root, where the mode bits stop
no write: "cannot be written" is a path under a regular file here (tests/unit/test_writable.py
injects a read-only answer)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from tests.integration.cli.test_bad_input import QUERIES, kvtune, listing
from tests.paths import UNIT_DATA

ROWS: list[tuple[str, list[str], str]] = [
    # -- the study file's bytes (study/study_yaml.py) --
    ("a study file in Latin-1", ["run", "--study-file", "{d}/latin1.yaml"], "is not UTF-8 text (byte 0xe9 at offset"),
    ("a model as the study file", ["run", "--study-file", "{d}/cut.gguf"], "is a GGUF model, not a YAML study file"),
    ("a binary study file", ["run", "--study-file", "{d}/binary.yaml"], "is a binary file (it holds NUL bytes)"),
    ("a study file over 1 MiB", ["run", "--study-file", "{d}/huge.yaml"], "is over 1 MiB"),
    ("a billion laughs", ["run", "--study-file", "{d}/laughs.yaml"], "holds more than 10000 values once its aliases"),
    ("an alias to itself", ["run", "--study-file", "{d}/circular.yaml"], "has an alias that refers to itself"),
    ("a study file that is a folder", ["run", "--study-file", "{d}/db"], "is a folder: give a YAML file in it"),
    (
        "targets written twice",
        ["run", "--study-file", "{d}/targets-twice.yaml"],
        "gives the key 'targets' twice (lines 1 and 3): YAML would keep only the second",
    ),
    (
        "a workload key written twice",
        ["run", "--study-file", "{d}/users-twice.yaml"],
        "gives the key 'concurrency' twice (lines 3 and 4)",
    ),
    # -- a model cut short (gguf_file.read_gguf, launchers/models.py) --
    ("a GGUF cut short", ["run", "--model", "{d}/cut.gguf"], "cut.gguf' is not a readable GGUF file ("),
    ("a GGUF of its magic alone", ["run", "--model", "{d}/magic.gguf"], "magic.gguf' is not a readable GGUF file (4"),
    ("a draft model cut short", ["run", "--set", "draft_model={d}/cut.gguf"], "draft_model '"),
    ("a study file's model cut short", ["run", "--study-file", "{d}/cut-model.yaml"], "is not a readable GGUF file"),
    # -- places that cannot be written (writable.py) --
    ("a runs folder under a file", ["run", "--runs-dir", "{d}/a-file/runs"], "which is a file, not a folder"),
    ("a runs folder that is a file", ["run", "--runs-dir", "{d}/a-file"], "is a file, not a folder: give a folder"),
    ("report: an output under a file", ["report", "s", "-o", "{d}/a-file/r.html"], "is a file, not a folder"),
    ("report: an output in no folder", ["report", "s", "-o", "{d}/nope/r.html"], "nope does not exist; create it"),
    ("export: an output under a file", ["export", "s", "-o", "{d}/a-file/run.sh"], "is a file, not a folder"),
    ("export: an output that is a folder", ["export", "s", "-o", "{d}/db"], "is a folder: give a file name in it"),
    # -- empty values that would silently mean a default --
    ("an empty model", ["run", "--model", ""], "--model is empty: give a GGUF file"),
    ("an empty deploy host", ["run", "--set", "deploy_host="], "--set deploy_host= has no value"),
    (
        "a deploy host as a URL",
        ["run", "--set", "deploy_host=http://0.0.0.0"],
        "deploy_host 'http://0.0.0.0' is not an",
    ),
    ("an empty study file", ["run", "--study-file", ""], "--study-file is empty"),
    ("an empty runs folder", ["run", "--runs-dir", ""], "--runs-dir is empty"),
    ("show: an empty runs folder", ["show", "s", "--runs-dir", ""], "--runs-dir is empty"),
    ("an empty llama-server", ["run", "--set", "llama_server="], "--set llama_server= has no value"),
    ("a blank llama-server", ["run", "--set", "llama_server=' '"], "llama_server is empty: give"),
    (
        "a removed flag",
        ["run", "--num-requests", "8"],
        "--num-requests is a study-file key now: --set workload.num_requests=VALUE",
    ),
    ("a setting mistyped", ["run", "--set", "num_request=8"], "no such setting; did you mean workload.num_requests"),
    ("an empty dataset", ["run", "--dataset", " "], "--dataset is empty"),
    ("doctor: an empty llama-server", ["doctor", "--llama-server", ""], "--llama-server is empty"),
    ("doctor: an empty vLLM Python", ["doctor", "--vllm-python", ""], "--vllm-python is empty"),
    # -- a --llama-server that is not llama-server (launchers/llama_binary.py check_is_server) --
    (
        "/bin/true as llama-server",
        ["run", "--set", "llama_server=/bin/true"],
        "is not llama-server: `true --help` lists",
    ),
    ("another llama.cpp tool", ["run", "--set", "llama_server={d}/llama-cli"], "lists no --port or --parallel"),
    ("doctor: a llama-server not there", ["doctor", "--llama-server", "{d}/nope"], "which is not an executable"),
    ("doctor: /bin/true as llama-server", ["doctor", "--llama-server", "/bin/true"], "is not llama-server"),
    # -- targets that can never hold (objectives/targets.py) --
    ("a TTFT below 0 s", ["run", "--target", "ttft<0s"], "can never hold: ttft is never below 0"),
    ("no errors below none", ["run", "--target", "error_rate<0%"], "error_rate is never below 0"),
    ("a throughput below 0", ["run", "--target", "output_throughput<0"], "output_throughput is never below 0"),
    ("a TPOT of at most 0", ["run", "--target", "tpot_p99<=0ms"], "tpot is always above 0"),
    (
        "relative bounds that exclude each other",
        ["run", "--target", "ttft<0.5x", "--target", "ttft>0.8x"],
        "targets 'ttft>0.8x' and 'ttft<0.5x' contradict each other",
    ),
    ("a study file's target below 0", ["run", "--study-file", "{d}/target0.yaml"], "targets: target 'e2el<0ms'"),
    # -- the fidelity gate (objectives/targets.py, study/spec.py, cli/bench.py) --
    ("a KL bound of 0", ["run", "--target", "kld<0"], "no config can be below 0; give a positive bound"),
    ("a KL floor", ["run", "--target", "kld>0.1"], "kld takes an upper bound, e.g. 'kld<0.01'"),
    ("a KL bound with a unit", ["run", "--target", "kld<5ms"], "is a KL divergence in nats, written without a unit"),
    (
        "a KL target with the gate off",
        ["run", "--target", "kld<0.05", "--set", "fidelity_gate=false"],
        "a kld target and fidelity_gate: false contradict each other",
    ),
    (
        "a KL target for bench",
        ["bench", "http://127.0.0.1:9", "--target", "kld<0.05"],
        "which kvtune bench does not start",
    ),
    ("reference prompts not there", ["run", "--study-file", "{d}/prompts-missing.yaml"], "fidelity_prompts: '"),
    ("reference prompts that are empty", ["run", "--study-file", "{d}/prompts-empty.yaml"], "holds no prompt"),
    # -- a value typed as a flag is refused under the flag (cli/flag_names.py) --
    ("negative output tokens", ["run", "--output-tokens", "-64"], "--output-tokens must be at least 1, got -64"),
    (
        "no measured requests",
        ["run", "--set", "workload.num_requests=0"],
        "workload.num_requests must be at least 1, got 0",
    ),
    ("a negative seed", ["run", "--set", "seed=-1"], "seed must be between 0 and 2**32-1"),
    (
        "no turns",
        ["run", "--workload", "multiturn", "--set", "workload.turns=0"],
        "workload.turns must be at least 1, got 0",
    ),
    ("a negative rate", ["run", "--rate", "-2"], "--rate must be a positive number of requests/s"),
    (
        "a study file's negative output",
        ["run", "--study-file", "{d}/output-neg.yaml"],
        "workload.output_tokens must be",
    ),
    # -- a flag's value by class: a server's URL, words, numbers, files to write (cli/flag_values.py) --
    ("bench: port 70000", ["bench", "http://127.0.0.1:70000"], "has port '70000': a TCP port is 1..65535"),
    ("bench: port 0", ["bench", "http://127.0.0.1:0"], "has port 0: a TCP port is 1..65535"),
    ("bench: a port in words", ["bench", "http://127.0.0.1:http"], "has port 'http'"),
    ("bench: an IPv6 bracket left open", ["bench", "http://[::1"], "'http://[::1' is not a URL"),
    ("bench: a URL with a newline", ["bench", "http://127.0.0.1:9\n"], "URL holds a control character (U+000A)"),
    ("bench: a URL with no host", ["bench", "http://:9"], "names no host"),
    (
        "bench: the OpenAI base URL",
        ["bench", "http://127.0.0.1:9/v1"],
        "give the server's base URL, http://127.0.0.1:9",
    ),
    ("bench: an empty URL", ["bench", " "], "the URL is empty"),
    ("bench: a blank model", ["bench", "http://127.0.0.1:9", "--model", " "], "--model is empty"),
    ("bench: a model with a newline", ["bench", "http://127.0.0.1:9", "--model", "a\nb"], "--model holds a control"),
    ("bench: an empty API key", ["bench", "http://127.0.0.1:9", "--api-key", ""], "--api-key is empty"),
    ("bench: an API key with a blank", ["bench", "http://127.0.0.1:9", "--api-key", "Bearer x"], "--api-key holds a"),
    ("bench: an empty tokenizer", ["bench", "http://127.0.0.1:9", "--tokenizer", ""], "--tokenizer is empty"),
    ("bench: results under a file", ["bench", "http://127.0.0.1:9", "--save", "{d}/a-file/r.json"], "is a file, not"),
    ("bench: results to a folder", ["bench", "http://127.0.0.1:9", "--save", "{d}/db"], "is a folder: give a file"),
    ("bench: results nowhere", ["bench", "http://127.0.0.1:9", "--save", ""], "--save is empty"),
    (
        "bench: a sweep to nan",
        ["bench", "http://127.0.0.1:9", "--rate", "1,nan"],
        "positive number of requests/s, got 'nan'",
    ),
    (
        "bench: a sweep past the most",
        ["bench", "http://127.0.0.1:9", "--rate", "1,2e6"],
        "--rate must be at most 1000000",
    ),
    ("bench: a rate in Arabic-Indic digits", ["bench", "http://127.0.0.1:9", "--rate", "١٢"], "--rate takes a number"),
    ("bench: an empty SLO", ["bench", "http://127.0.0.1:9", "--slo", ","], "--slo is empty"),
    (
        "bench: an SLO metric twice",
        ["bench", "http://127.0.0.1:9", "--slo", "ttft<1s,ttft<2s"],
        "--slo limits ttft twice",
    ),
    ("bench: an SLO of 0", ["bench", "http://127.0.0.1:9", "--slo", "ttft<0s"], "SLO 'ttft<0s' can never hold"),
    (
        "bench: an SLO in hours",
        ["bench", "http://127.0.0.1:9", "--slo", "e2el<1h"],
        "time unit of s, ms or us (not 'h')",
    ),
    ("workers for a set-up", ["run", "--setup-only", "--workers", "2"], "--workers 2 runs trials at once on this host"),
    (
        "bench: a run setting",
        ["bench", "http://127.0.0.1:9", "--set", "trials=3"],
        "--set trials is a setting of kvtune run",
    ),
    (
        "bench: a workload setting twice, as typed",
        ["bench", "http://127.0.0.1:9", "--set", "seed=1", "--set", "seed=2"],
        "--set 'seed=1' and --set 'seed=2' give workload.seed two values",
    ),
    ("a setting given twice", ["run", "--set", "seed=1", "--set", "seed=2"], "give seed two values: give it once"),
    ("quiet and JSON lines", ["run", "--quiet", "--jsonl"], "--quiet and --jsonl contradict each other"),
    ("quiet and plain lines", ["run", "--progress", "plain", "--quiet"], "--quiet and --progress plain contradict"),
    ("a target past any measurement", ["run", "--target", "ttft<1e308s"], "1e308 is past any measurement"),
    ("a target in minutes", ["run", "--target", "ttft<1min"], "needs a time unit of s, ms or us (not 'min')"),
    ("a time budget in Arabic-Indic digits", ["run", "--time-budget", "١٢"], "--time-budget '١٢' is not a duration"),
    ("a flag taken as a value", ["run", "--runs-dir", "--trials", "3"], "--runs-dir took '--trials' as its value"),
    ("a value after '=='", ["run", "--model==x.gguf"], "--model '=x.gguf' starts with '=': write --model x.gguf"),
    ("report: -o=FILE", ["report", "s", "-o=r.html"], "-o '=r.html' starts with '=': write -o r.html"),
    ("show: a study name with a newline", ["show", "a\nb"], "the study name holds a control character (U+000A)"),
    ("export: a host with a newline", ["export", "s", "--host", "0.0.0.0\n"], "--host holds a control character"),
    (
        "proxy: a URL as the host",
        ["proxy", "--storage", "sqlite:///{d}/p.db", "--host", "http://0.0.0.0"],
        "is not an address",
    ),
    (
        "proxy: no such IPv4 address",
        ["proxy", "--storage", "sqlite:///{d}/p.db", "--host", "999.1.1.1"],
        "is not an address",
    ),
    ("proxy: a blank host", ["proxy", "--storage", "sqlite:///{d}/p.db", "--host", " "], "--host is empty"),
    ("export: two hosts", ["export", "s", "--host", "0.0.0.0 ::"], "--host '0.0.0.0 ::' is not an address"),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-classes")
    (d / "latin1.yaml").write_bytes("study: café\n".encode("latin-1"))
    (d / "binary.yaml").write_bytes(b"study: s\n\0\0\x01binary")
    (d / "huge.yaml").write_bytes(b"# padding\n" * ((1 << 20) // 10 + 1))
    laughs = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    laughs += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    (d / "laughs.yaml").write_text("\n".join(laughs) + "\n")
    (d / "circular.yaml").write_text("space:\n  parallel: &p [1, *p]\n")
    (d / "targets-twice.yaml").write_text('targets: ["ttft<1s"]\ntrials: 3\ntargets: ["tpot<100ms"]\n')
    (d / "users-twice.yaml").write_text("study: s\nworkload:\n  concurrency: 2\n  concurrency: 4\n")
    (d / "target0.yaml").write_text('targets: ["e2el<0ms"]\n')
    (d / "prompts-missing.yaml").write_text("fidelity_prompts: no-such-prompts.txt\n")
    (d / "no-prompts.txt").write_text("\n\n")
    (d / "prompts-empty.yaml").write_text("fidelity_prompts: no-prompts.txt\n")
    (d / "output-neg.yaml").write_text("workload:\n  output_tokens: -64\n")
    (d / "cut.gguf").write_bytes(whole_gguf(d)[:200])
    (d / "magic.gguf").write_bytes(b"GGUF")
    (d / "cut-model.yaml").write_text(f"model: {d}/cut.gguf\n")
    (d / "a-file").write_text("in the way\n")
    (d / "db").mkdir()
    (d / "help.txt").write_text((UNIT_DATA / "llama_server_help.txt").read_text())
    for name, help_text in (("llama-server", f"cat {d}/help.txt"), ("llama-cli", "echo 'usage: llama-cli -m FNAME'")):
        script = d / name
        script.write_text(
            f'#!/bin/sh\necho "$@" >> {d}/calls.log\ncase "$*" in *--help*) {help_text}; exit 0;; '
            "*--version*|*--list-devices*) exit 0;; esac\nsleep 30\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return d


def whole_gguf(d: Path) -> bytes:
    """A whole GGUF of two small tensors, written by gguf's own writer (cut short for the rows)."""
    from gguf import GGUFWriter

    path = d / "whole.gguf.tmp"
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_tensor("t0", np.arange(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    data = path.read_bytes()
    path.unlink()
    return data


@pytest.mark.parametrize("what,argv,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_each_class_is_one_line_exit_2_and_nothing_started(inputs, tmp_path, what, argv, phrase):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (inputs / "calls.log").unlink(missing_ok=True)
    before = listing(inputs)
    args = [a.replace("{d}", str(inputs)) for a in argv]
    if args[0] in ("run", "show", "report", "export"):  # first: a row's own --runs-dir comes later and wins
        args[1:1] = ["--runs-dir", str(tmp_path / "runs")]
    env = {**os.environ, "KVTUNE_LLAMA_SERVER": str(inputs / "llama-server"), "COLUMNS": "400"}
    env.pop("KVTUNE_STORAGE", None)
    env.pop("KVTUNE_RUNS_DIR", None)
    started = time.monotonic()
    r = kvtune(args, cwd, env)
    took = time.monotonic() - started
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (what, r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("kvtune: error: ") and phrase in lines[0], (what, r.stderr)
    assert not r.stdout.strip(), f"{what}: printed before the refusal: {r.stdout}"
    assert not (tmp_path / "runs").exists(), f"{what}: a runs folder was written"
    assert not list(cwd.iterdir()), f"{what}: written in the current folder: {list(cwd.iterdir())}"
    assert listing(inputs) == before, f"{what}: written beside the inputs"
    calls = (inputs / "calls.log").read_text().splitlines() if (inputs / "calls.log").exists() else []
    assert all(any(q in c for q in QUERIES) for c in calls), f"{what}: a server was started: {calls}"
    assert took < 30, f"{what}: took {took:.0f} s to refuse"
