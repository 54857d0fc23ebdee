"""`kvtune export --format bench`: the verification script re-runs the study's workload with its
targets (relative ones fixed from the baseline) and prints the `vllm bench serve` equivalent; run
for real (bash, `kvtune bench`) against the fake server, it exits 0 when the targets hold and 1
when one is missed.

Here the tests that start processes; the rest are in tests/unit/artifacts/test_bench_script.py."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from kvtune.artifacts import bench_script, export
from kvtune.artifacts import overview as ov
from kvtune.artifacts.deployable import Deployable
from kvtune.bench.traces import fitted_trace
from kvtune.testing.fake_server import FakeOpenAIServer
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
KVTUNE = f"{shlex.quote(sys.executable)} -m kvtune.cli"


def results(**spec) -> dict:
    r = json.loads((DATA / "results_small.json").read_text())
    r["spec"].update(spec)
    return r


def script(r: dict, port: int = 8080) -> str:
    return export.render("bench", ov.pick_trial(r).to_dict(), r, "0.0.0.0", port)


def _run(path: Path, url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(path), url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KVTUNE": KVTUNE, "COLUMNS": "200"},
    )


def test_the_script_runs_and_exits_on_the_targets(tmp_path) -> None:
    loose, tight = results(targets=["ttft<30s"]), results(targets=["ttft<1ms"])
    with FakeOpenAIServer(ttft_s=0.02, itl_s=0.002) as server:
        ok = export.write(tmp_path / "ok.sh", "bench", ov.pick_trial(loose).to_dict(), loose)
        bad = export.write(tmp_path / "bad.sh", "bench", ov.pick_trial(tight).to_dict(), tight)
        assert os.access(ok, os.X_OK)
        held, missed = _run(ok, server.base_url), _run(bad, server.base_url)
    assert held.returncode == 0, held.stdout + held.stderr
    assert "vllm bench serve" in held.stdout and f"--base-url {server.base_url}" in held.stdout
    assert "target ttft_p95<30000ms: met" in held.stdout
    assert missed.returncode == 1, missed.stdout + missed.stderr
    assert "targets missed: ttft_p95<1ms" in missed.stdout


def test_the_script_of_a_study_with_an_slo_measures_its_attainment_and_checks_its_target(tmp_path) -> None:
    r = results(slo="ttft<2s,tpot<100ms", targets=["slo_attainment>99%"])
    with FakeOpenAIServer(ttft_s=0.02, itl_s=0.002) as server:
        path = export.write(tmp_path / "slo.sh", "bench", ov.pick_trial(r).to_dict(), r)
        held = _run(path, server.base_url)
    assert held.returncode == 0, held.stdout + held.stderr
    assert "target slo_attainment>99%: met (100.0%)" in held.stdout and "--goodput ttft:2000 tpot:100" in held.stdout


def test_the_studys_model_is_the_tokenizer_when_it_is_on_this_box(tmp_path) -> None:
    model = tmp_path / "it's a model.gguf"
    model.write_text("x")
    r = results(model=str(model))
    for trial in r["trials"]:  # the path the server loaded is the tokenizer
        trial["argv"][trial["argv"].index("--model") + 1] = str(model)
    text = script(r)
    assert f"MODEL_TOKENIZER={shlex.quote(str(model))}" in text
    assert "Hugging Face id" in text  # vllm bench serve cannot tokenize with a GGUF path
    # bash sees the path byte-identical (the echo stands in for kvtune)
    p = subprocess.run(
        ["bash", "-c", text.replace('exec "${KVTUNE_CMD[@]}"', 'printf "%s\\n"')],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "KVTUNE": "x"},
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == str(model)  # the last argument: --tokenizer PATH


def test_a_trace_study_replays_its_trace_and_writes_the_rows_vllm_would_replay(tmp_path) -> None:
    fit = {"trace": "mooncake-conv", "trace_requests": 4, "trace_speed": 50.0, "trace_length_scale": 0.01}
    r = results(workload={**results()["spec"]["workload"], **fit}, targets=["ttft<30s"])
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.001) as server:
        path = export.write(tmp_path / "trace.sh", "bench", ov.pick_trial(r).to_dict(), r)
        run = _run(path, server.base_url)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "replayed 4 requests of mooncake_conversation" in run.stdout
    line = next(x for x in run.stdout.splitlines() if "vllm bench serve" in x and "--dataset-path" in x)
    rows = Path(shlex.split(line)[shlex.split(line).index("--dataset-path") + 1])
    try:
        sent = [json.loads(x)["output_length"] for x in rows.read_text().splitlines()]
        assert sent == [q.output_tokens for q in fitted_trace(Workload(**fit)).requests]
    finally:
        rows.unlink()


def test_a_multiturn_study_replays_its_conversations_and_prints_no_vllm_line(tmp_path) -> None:
    talk = {"multiturn": True, "turns": 2, "think_time_s": 0.01}
    r = results(workload={**results()["spec"]["workload"], **talk}, targets=["ttft<30s"])
    with FakeOpenAIServer(ttft_s=0.01, itl_s=0.001, prefix_cache=True) as server:
        path = export.write(tmp_path / "talk.sh", "bench", ov.pick_trial(r).to_dict(), r)
        run = _run(path, server.base_url)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "replaying 2 conversations of 2 turns" in run.stdout and "cache_prompt=true sent" in run.stdout
    assert "no vllm bench serve line" in run.stdout and "--base-url" not in run.stdout
    assert sorted(len(b["messages"]) for b in server.received[1:]) == [1, 1, 3, 3]  # after 1 warm-up turn


def _clean_shell(path: Path, url: str, path_var: str = "/usr/bin:/bin", **env: str) -> subprocess.CompletedProcess:
    """The script run as a new user would: `env -i`, no venv on PATH, no KVTUNE."""
    return subprocess.run(
        ["env", "-i", f"PATH={path_var}", f"HOME={os.environ.get('HOME', '/')}", *[f"{k}={v}" for k, v in env.items()]]
        + ["bash", str(path), url],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_script_runs_from_a_clean_shell_with_the_kvtune_that_wrote_it(tmp_path) -> None:
    # issue 41: `exec: kvtune: not found`, exit 127, unless the venv was active or KVTUNE set
    r = results(targets=["ttft<30s"])
    with FakeOpenAIServer(ttft_s=0.02, itl_s=0.002) as server:
        path = export.write(tmp_path / "verify.sh", "bench", ov.pick_trial(r).to_dict(), r)
        run = _clean_shell(path, server.base_url)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "target ttft_p95<30000ms: met" in run.stdout


def test_a_script_whose_kvtune_is_gone_says_so_in_one_line_or_runs_the_one_on_path(tmp_path) -> None:
    r = results(targets=["ttft<30s"])
    text = bench_script.render(Deployable.read(ov.pick_trial(r), r), "127.0.0.1", 8080, [], kvtune=["/gone/bin/python"])
    path = tmp_path / "verify.sh"
    path.write_text(text)
    gone = _clean_shell(path, "http://127.0.0.1:9")
    assert gone.returncode == 127 and gone.stdout == ""
    assert gone.stderr.splitlines() == [
        f"{path}: no kvtune to run: /gone/bin/python, the kvtune that wrote this script, is not here and "
        "none is on PATH; set KVTUNE (e.g. KVTUNE='python3 -m kvtune.cli')"
    ]
    bin_dir = tmp_path / "bin"  # a kvtune on PATH stands in (this one prints what it was asked)
    bin_dir.mkdir()
    (bin_dir / "kvtune").write_text('#!/bin/sh\necho "kvtune $1 $2"\n')
    os.chmod(bin_dir / "kvtune", 0o755)
    on_path = _clean_shell(path, "http://127.0.0.1:9", f"{bin_dir}:/usr/bin:/bin")
    assert on_path.returncode == 0, on_path.stderr
    assert on_path.stdout.splitlines()[-1] == "kvtune bench http://127.0.0.1:9"
    assert f"running {bin_dir}/kvtune" in on_path.stderr
    named = _clean_shell(path, "http://127.0.0.1:9", KVTUNE=f"{bin_dir}/kvtune")  # KVTUNE still decides
    assert named.returncode == 0 and named.stderr == "", named.stderr
