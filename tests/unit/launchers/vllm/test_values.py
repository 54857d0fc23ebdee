"""vLLM's small value helpers (launchers/vllm/values.py): CPU lists in vLLM's syntax both ways,
the --max-model-len choices, the GPUs a server sees under CUDA_VISIBLE_DEVICES, and the server
defaults the named best's flag count is taken against. GPU facts are built in the test."""

from __future__ import annotations

import pytest

from kvtune.launchers.vllm.defaults import FALLBACK
from kvtune.launchers.vllm.values import (
    GPU_BLOCK_SIZE,
    V1_DEFAULTS,
    gpus_in_view,
    id_list,
    max_len_choices,
    parse_id_list,
    server_defaults,
)
from kvtune.planner.gpus import GpuInfo
from kvtune.workload import Workload


def test_cpu_lists() -> None:
    """(moved from tests/unit/launchers/test_vllm.py)"""
    assert id_list((0, 1, 2, 5)) == "0-2,5"
    assert parse_id_list("0-2,5") == [0, 1, 2, 5]
    assert parse_id_list("2-1") is None


@pytest.mark.parametrize("ids", [[3], [5, 0, 1, 2], [0, 2, 4], list(range(16)), []])
def test_a_cpu_list_reads_back_as_the_sorted_ids(ids):
    text = id_list(ids)
    assert (parse_id_list(text) if text else []) == sorted(ids)


@pytest.mark.parametrize("text", ["", "a", "1-", "1,,2", "-3", "1-2-3"])
def test_a_malformed_cpu_list_is_none(text):
    assert parse_id_list(text) is None


def test_max_len_choices_round_the_request_up_to_256_within_the_models_positions():
    w = Workload(prompt_tokens=200, output_tokens=64)  # 264 tokens a request
    assert max_len_choices(w, None) == (512, 1024, 2048)
    assert max_len_choices(w, 1024) == (512, 1024)
    assert max_len_choices(w, 300) == (300,)  # no 256-step fits: the model's own length holds the request
    assert max_len_choices(w, 200) == (512,)  # the model cannot hold it: the request length (pre-screened out)


def gpu(index: int) -> GpuInfo:
    return GpuInfo(
        index=index, name=f"gpu{index}", total_bytes=80 * 2**30, free_bytes=79 * 2**30, bandwidth_bytes_s=None
    )


def test_visible_gpus_follow_cuda_visible_devices_in_its_order():
    gpus = [gpu(0), gpu(1), gpu(2)]
    assert [g.index for g in gpus_in_view(gpus, {"CUDA_VISIBLE_DEVICES": "2,0"})] == [2, 0]
    assert [g.index for g in gpus_in_view(gpus, {"CUDA_VISIBLE_DEVICES": " 1 , 7 "})] == [1]  # 7 is not on this host
    assert gpus_in_view(gpus, {}) == tuple(gpus)
    assert gpus_in_view(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-1a2b"}) == tuple(
        gpus
    )  # UUIDs: not plain indices, all of them
    assert gpus_in_view(gpus, {"CUDA_VISIBLE_DEVICES": ""}) == ()


def test_server_defaults_are_the_devices_own_for_the_knobs_tuned():
    knobs = {"block-size", "enable-prefix-caching", "max-num-seqs", "gpu-memory-utilization"}
    on_gpu = server_defaults(False, knobs, {"block-size": 128}, FALLBACK)
    assert on_gpu == {
        "block-size": GPU_BLOCK_SIZE,
        "enable-prefix-caching": V1_DEFAULTS["enable-prefix-caching"],
        "gpu-memory-utilization": 0.92,  # the engine's default as read (here: the 0.33 table)
    }
    on_cpu = server_defaults(True, knobs, {"block-size": 128, "max-num-seqs": 256}, FALLBACK)
    assert on_cpu == {"block-size": 128, "enable-prefix-caching": True, "max-num-seqs": 256}
    assert server_defaults(True, set(), {"block-size": 128}, FALLBACK) == {}
