"""The fidelity gate on the real llama-server and the demo model: the defaults on a fresh server
answer the reference prompts exactly as the first server did (the A/A passes the gate), a q4_0
K+V cache moves the answers far past it (refused), and a whole study whose space holds the cache
types refuses the quantised ones and names a config that answers like the defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvtune.bench.fidelity_probe import ProbePlan, ask_answers, shipped_prompts
from kvtune.clock import REAL_CLOCK
from kvtune.knobs import Candidate
from kvtune.objectives.targets import DEFAULT_FIDELITY_TARGET, parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.trial.fidelity_check import FidelityCheck, fidelity_line, fidelity_metrics
from tests.e2e.conftest import demo_llama_server

pytestmark = pytest.mark.e2e
Q4 = {"flash-attn": "on", "cache-type-k": "q4_0", "cache-type-v": "q4_0"}
GATE = parse_target(DEFAULT_FIDELITY_TARGET)


def test_the_defaults_a_a_passes_the_gate_and_a_q4_0_cache_is_refused(tmp_path: Path, llama_server: str):
    plan = ProbePlan(shipped_prompts())
    base = TrialOutcome(0, Candidate(), [], {}, baseline=True)
    with demo_llama_server(llama_server, {}, tmp_path / "reference.log") as (proc, launcher, _):
        check = FidelityCheck(launcher, plan, ask_answers, REAL_CLOCK)
        base.fidelity = check.probe(proc.base_url, base, None)
    assert base.fidelity["role"] == "reference" and len(base.fidelity["reference"]) == len(plan.prompts)
    with demo_llama_server(llama_server, {}, tmp_path / "aa.log") as (proc, _, _):
        aa = check.probe(proc.base_url, TrialOutcome(0, Candidate(), [], {}, baseline=True), base)
    print(fidelity_line(aa))
    assert aa["role"] == "floor" and GATE.met(fidelity_metrics(aa)), fidelity_line(aa)
    with demo_llama_server(llama_server, Q4, tmp_path / "q4.log") as (proc, _, _):
        q4 = check.probe(proc.base_url, TrialOutcome(1, Candidate(flags=Q4), [], {}), base)
    print(fidelity_line(q4))
    assert q4["role"] == "probed" and q4["changed"] == ["cache-type-k", "cache-type-v"]
    assert not GATE.met(fidelity_metrics(q4)), fidelity_line(q4)
    assert q4["agreement"] < aa["agreement"] and q4["kld"] > aa["kld"]


STUDY = """\
study: fidelity-e2e
backend: llama-server
model: demo
objective: output_throughput
trials: 5
sampler: grid
confirm_top: 0
workload:
  concurrency: 2
  prompt_tokens: 32
  output_tokens: 8
  num_requests: 8
  warmup_requests: 1
space:
  parallel: [2]
  ctx-per-slot: null
  threads: null
  batch-size: null
  ubatch-size: null
  flash-attn: ["on"]
  cache-type-k: [f16, q4_0]
  cache-type-v: [f16, q4_0]
  cont-batching: null
"""


def test_a_study_over_cache_types_refuses_the_quantised_ones_and_names_one_that_answers_alike(
    tmp_path: Path, llama_server: str
):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "run", "--study-file", str(study), "--runs-dir", str(tmp_path / "runs")]
        + ["--progress", "plain"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((tmp_path / "runs" / "fidelity-e2e" / "results.json").read_text())
    assert "kld<0.01" in " ".join(results["targets"]) or any("KL divergence" in t for t in results["targets"])
    gate = results["fidelity"]
    trials = {t["number"]: t for t in results["trials"]}
    lossy = {n for n, t in trials.items() if "q4_0" in t["candidate"]["flags"].values()}
    both = [n for n, t in trials.items() if list(t["candidate"]["flags"].values()).count("q4_0") == 2]
    refused = {x["trial"] for x in gate["refused"]}
    assert gate["state"] == "on" and gate["probed"] == len(lossy) and both and set(both) <= refused <= lossy
    for n, t in trials.items():  # refused exactly where the upper bound passes the gate's threshold
        upper = (t.get("fidelity") or {}).get("kld_upper", 0.0)
        assert (n in refused) == (upper is None or upper >= 0.01), t  # None: an infinite KL
    for n in refused:
        assert not trials[n]["feasible"] and "kld<0.01" in trials[n]["reason"]
    best = trials[results["best_trial"]]
    assert best["number"] not in refused and "q4_0" not in " ".join(results["best_argv"])
    assert "fidelity gate: kld<0.01" in r.stdout and "refused" in r.stdout
