"""`kvtune export --format bench`: the verification script re-runs the study's workload with its
targets (relative ones fixed from the baseline) and prints the `vllm bench serve` equivalent; run
for real (bash, `kvtune bench`) against the fake server, it exits 0 when the targets hold and 1
when one is missed.

The tests here start no process; those that do are in tests/integration/artifacts/test_bench_script.py."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from kvtune.artifacts import bench_script, export
from kvtune.artifacts import overview as ov
from kvtune.errors import SpecError
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
KVTUNE = f"{shlex.quote(sys.executable)} -m kvtune.cli"


def results(**spec) -> dict:
    r = json.loads((DATA / "results_small.json").read_text())
    r["spec"].update(spec)
    return r


def script(r: dict, port: int = 8080) -> str:
    return export.render("bench", ov.pick_trial(r).to_dict(), r, "0.0.0.0", port)


def test_the_script_carries_the_workload_targets_and_the_vllm_line() -> None:
    text = script(results())
    assert text.startswith("#!/usr/bin/env bash\n") and 'URL="${1:-http://127.0.0.1:8080}"' in text
    run = next(line for line in text.splitlines() if line.startswith("exec "))
    args = shlex.split(run)
    for flag, value in (
        ("--concurrency", "2"),
        ("--prompt-tokens", "32"),
        ("--output-tokens", "8"),
        ("--num-requests", "4"),
        ("--warmup-requests", "1"),
        ("--seed", "0"),
    ):
        assert args[args.index(flag) + 1] == value
    assert [args[i + 1] for i, a in enumerate(args) if a == "--target"] == ["ttft_p95<60000ms", "error_rate<1%"]
    vllm = shlex.split(next(line for line in text.splitlines() if line.startswith("printf")))[2]
    assert vllm.startswith("vllm bench serve --backend openai-chat --endpoint /v1/chat/completions")
    assert "--max-concurrency 2" in vllm and "--random-input-len 32" in vllm and "--goodput ttft:60000" in vllm


def test_relative_targets_are_fixed_at_the_baselines_threshold() -> None:
    r = results(targets=["ttft<0.5x"])
    base = r["trials"][0]["metrics"]["p95_ttft_ms"]
    [ttft, _] = bench_script.absolute_targets(r)
    assert ttft.threshold == pytest.approx(0.5 * base) and not ttft.relative
    r["trials"][0]["metrics"] = None
    with pytest.raises(SpecError, match="not measured"):
        bench_script.absolute_targets(r)


def test_open_loop_and_capacity_studies() -> None:
    r = results(
        workload={"mode": "open", "rate": 2.0, "arrival": "gamma", "burstiness": 0.5, "num_requests": 10},
        objective="capacity",
    )
    trial = ov.pick_trial(r).to_dict()
    trial["metrics"]["capacity"] = 3.5
    text = export.render("bench", trial, r)
    assert "--rate 3.5 --arrival gamma --burstiness 0.5" in text
    assert "--request-rate 3.5 --burstiness 0.5" in text
    trial["metrics"]["capacity"] = 0
    with pytest.raises(SpecError, match="no capacity"):
        export.render("bench", trial, r)
