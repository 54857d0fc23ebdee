"""Planning for a GPU from the spec-sheet table (hardware the user may not have)."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.planner.gpus import (
    BANDWIDTH_TABLE,
    DENSE_TFLOPS,
    MEMORY_GIB,
    CpuRam,
    GpuInfo,
    first_gpus,
    hardware_budget,
    known_gpus,
    named_budget,
    named_gpu,
)

GiB = 2**30


@pytest.mark.parametrize("name", ["H100 SXM", "h100-sxm", "h100sxm", "NVIDIA H100 80GB HBM3"])
def test_a_gpu_by_its_table_label_or_its_nvml_name(name):
    m = named_gpu(name)
    assert (m.label, m.memory_bytes, m.bandwidth_bytes_s, m.nvlink_bytes_s) == ("H100 SXM", 80 * GiB, 3.35e12, 9e11)


def test_every_table_row_has_a_memory_size():
    assert set(known_gpus()) == set(MEMORY_GIB) and len(known_gpus()) == len(BANDWIDTH_TABLE)
    assert named_gpu("RTX 4090").nvlink_bytes_s is None


def test_an_unknown_gpu_names_the_known_ones():
    with pytest.raises(SpecError) as e:
        named_gpu("nosuch")
    assert str(e.value).startswith(
        "unknown GPU 'nosuch': use one of B300, B200, GH200 144GB, GH200, H200, H20, H100 NVL"
    )
    assert "\n" not in str(e.value)


def test_two_named_gpus_add_up_and_nothing_is_read_from_this_machine():
    hw = named_budget("H100 SXM", 2)
    assert hw.kind == "named" and hw.memory_bytes == 160 * GiB and hw.bandwidth_bytes_s == pytest.approx(6.7e12)
    assert hw.free_bytes is None and len(hw.gpus) == 2
    assert hw.description == "2 x H100 SXM (spec sheet: 80 GiB, 3.35 TB/s each)"
    assert named_budget("L4", 1, memory_bytes=20 * GiB).memory_bytes == 20 * GiB  # --memory still wins
    with pytest.raises(SpecError, match="--gpus must be at least 1"):
        named_budget("L4", 0)


def test_the_first_gpus_of_this_machine():
    gpus = [GpuInfo(i, "NVIDIA L4", 24 * GiB, 24 * GiB, 3e11) for i in range(2)]
    assert first_gpus(gpus, None) == gpus and first_gpus(gpus, 1) == gpus[:1]
    with pytest.raises(SpecError, match=r"--gpus 3: this machine has 2 GPU\(s\); add --gpu NAME"):
        first_gpus(gpus, 3)


@pytest.mark.parametrize(
    ("nvml_name", "label", "memory_gib", "bandwidth", "nvlink", "tflops"),
    [
        ("NVIDIA GH200 480GB", "GH200", 96, 4.0e12, 9e11, 989),
        ("NVIDIA GH200 144G HBM3e", "GH200 144GB", 144, 4.9e12, 9e11, 989),
        ("NVIDIA H20", "H20", 96, 4.0e12, 9e11, 148),
        ("NVIDIA B300 SXM6 AC", "B300", 288, 8.0e12, 1.8e12, 2250),
        ("NVIDIA GeForce RTX 5090", "RTX 5090", 32, 1.792e12, None, 209.5),
        ("NVIDIA L40", "L40", 48, 8.64e11, None, 181),
        ("NVIDIA A10G", "A10G", 24, 6.0e11, None, None),  # no spec sheet gives its TFLOPS
        ("NVIDIA A10", "A10", 24, 6.0e11, None, 125),
        ("NVIDIA H200", "H200", 141, 4.8e12, 9e11, 989),
    ],
)
def test_the_added_gpus_by_their_nvml_names(nvml_name, label, memory_gib, bandwidth, nvlink, tflops):
    m = named_gpu(nvml_name)
    assert (m.label, m.memory_bytes, m.bandwidth_bytes_s, m.nvlink_bytes_s, m.dense_tflops) == (
        label,
        memory_gib * GiB,
        bandwidth,
        nvlink,
        tflops,
    )


def test_h20_and_gh200_are_not_taken_for_an_h200():
    assert named_gpu("NVIDIA H200").label == "H200"
    assert {named_gpu(n).label for n in ("NVIDIA H20", "NVIDIA GH200 480GB")} == {"H20", "GH200"}


def test_every_model_has_a_tflops_entry():
    assert set(DENSE_TFLOPS) == set(known_gpus())


def test_a_present_h200_plans_with_what_nvml_reports_not_the_spec_sheet():
    reported = 143771 * 2**20  # NVML's total memory on an H200 (issue 19), about 140.4 GiB
    here = hardware_budget([GpuInfo(0, "NVIDIA H200", reported, reported, 4.8e12)], CpuRam("", 0, 0))
    assert here.kind == "gpu" and here.memory_bytes == reported
    named = named_budget("H200")
    assert named.kind == "named" and named.memory_bytes == 141 * GiB != reported
