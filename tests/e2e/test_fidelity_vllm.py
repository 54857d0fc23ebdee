"""The fidelity gate on the real CPU vLLM and the demo model (its HF folder): the defaults on a
fresh server answer the reference prompts as the first did (the A/A passes), and an fp8 KV cache,
where this host can run one, is probed against them. vLLM's CPU fp8 KV cache needs AVX-512: on a
host without it the fp8 server does not start, and the test then checks that the start failure
is what a study would record (an infeasible trial, never a named config) instead of skipping."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvtune.bench.fidelity_probe import ProbePlan, ask_answers, shipped_prompts
from kvtune.clock import REAL_CLOCK
from kvtune.knobs import Candidate
from kvtune.launchers.process import ServerProcess, ServerStartError, free_port
from kvtune.launchers.vllm import MiB, VllmLauncher
from kvtune.objectives.targets import DEFAULT_FIDELITY_TARGET, parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.trial.fidelity_check import FidelityCheck, fidelity_line, fidelity_metrics

pytestmark = pytest.mark.e2e
STARTUP_TIMEOUT_S = 300.0
BASE = {"max-model-len": 512, "max-num-seqs": 4, "kv-cache-memory-bytes": 256 * MiB}
GATE = parse_target(DEFAULT_FIDELITY_TARGET)


@pytest.fixture(scope="module")
def launcher(vllm_importable: None) -> VllmLauncher:
    from kvtune.launchers.hf_model import demo_hf_model_path

    return VllmLauncher.create(str(demo_hf_model_path()))


def server(launcher: VllmLauncher, flags: dict, log: Path) -> ServerProcess:
    cand, port = Candidate(flags=flags), free_port()
    env = {**launcher.server_environment(), **launcher.environment(cand)}
    return ServerProcess(launcher.command(cand, port), env, log, port, health_path=launcher.health_path)


def has_avx512() -> bool:
    try:
        return "avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def test_the_a_a_passes_and_an_fp8_kv_cache_is_probed_or_fails_to_start(launcher: VllmLauncher, tmp_path: Path):
    check = FidelityCheck(launcher, ProbePlan(shipped_prompts()), ask_answers, REAL_CLOCK)
    base = TrialOutcome(0, Candidate(flags=BASE), [], {}, baseline=True)
    with server(launcher, BASE, tmp_path / "reference.log") as s:
        s.wait_ready(STARTUP_TIMEOUT_S)
        base.fidelity = check.probe(s.base_url, base, None)
    assert base.fidelity["role"] == "reference"
    with server(launcher, BASE, tmp_path / "aa.log") as s:
        s.wait_ready(STARTUP_TIMEOUT_S)
        aa = check.probe(s.base_url, TrialOutcome(0, Candidate(flags=BASE), [], {}, baseline=True), base)
    print(fidelity_line(aa))
    assert aa["role"] == "floor" and GATE.met(fidelity_metrics(aa)), fidelity_line(aa)
    fp8 = {**BASE, "kv-cache-dtype": "fp8"}
    assert launcher.numerics_changed(fp8) == ("kv-cache-dtype",)
    try:
        with server(launcher, fp8, tmp_path / "fp8.log") as s:
            s.wait_ready(STARTUP_TIMEOUT_S)
            rec = check.probe(s.base_url, TrialOutcome(1, Candidate(flags=fp8), [], {}), base)
    except ServerStartError as e:  # no AVX-512: the trial would be infeasible (start failed)
        print(f"fp8 KV cache did not start on this host ({'with' if has_avx512() else 'without'} AVX-512): {e}")
        assert not has_avx512(), f"fp8 should start on an AVX-512 host: {e}"
        return
    print(fidelity_line(rec))
    assert rec["role"] == "probed" and rec["changed"] == ["kv-cache-dtype"]
    assert math.isfinite(rec["kld_upper"]) and rec["kld"] > aa["kld"] and rec["agreement"] < 1.0
