"""Planning for a GPU from the spec-sheet table (hardware the user may not have)."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.planner.gpus import BANDWIDTH_TABLE, MEMORY_GIB, GpuInfo, first_gpus, known_gpus, named_budget, named_gpu

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
    assert str(e.value).startswith("unknown GPU 'nosuch': use one of B200, H200, H100 NVL")
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
