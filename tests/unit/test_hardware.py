"""Host facts: the fingerprint and its one-line description for each kind of machine, from NVML
answers kept as recordings (tests/unit/data/nvml, in `kvtune.nvml.record()`'s format), the
planner's budget from the same facts, and the cgroup CPU quota."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtune import hardware
from kvtune.hardware import detect_hardware
from kvtune.nvml import Interconnect, NvmlReport, read, record
from kvtune.planner.gpus import CpuRam, pcie_bandwidth
from kvtune.testing.nvml_recorded import Recorded
from tests.paths import NVML_DATA

DATA = NVML_DATA
GiB = 2**30
RAM = CpuRam("Test CPU", 64 * GiB, 48 * GiB)
NO_CGROUP = Path("/nonexistent-cgroup")


def recording(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def fp_of(name: str) -> dict:
    return hardware.fingerprint(Recorded(recording(name)), cgroup=NO_CGROUP)


def gpu_text(fp: dict) -> str:
    """describe() after the host's own CPU and RAM."""
    return hardware.describe(fp).split(" GiB RAM, ", 1)[1]


def budget(name: str):
    return detect_hardware(gpus=hardware.gpu_infos(hardware.gpu_report(Recorded(recording(name)))), ram=RAM)


def test_one_h100_sxm():
    fp = fp_of("h100_sxm_x1")
    assert fp["accelerator"] == "1 x NVIDIA H100 80GB HBM3" and fp["gpu_count"] == 1
    assert fp["gpus"] == [
        {"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6, "compute_capability": "9.0", "bandwidth_gb_s": 3350.0}
    ]
    assert hardware.gpu_lines(fp) == ["GPU 0: NVIDIA H100 80GB HBM3, 79.6 GiB, compute 9.0, 3350 GB/s (spec sheet)"]
    assert (fp["cuda"], fp["gpu_driver"]) == ("12.4", "550.54.15")
    assert "gpu_interconnect" not in fp and "gpu_notes" not in fp
    assert gpu_text(fp) == "1 x NVIDIA H100 80GB HBM3, compute 9.0, CUDA 12.4, driver 550.54.15"
    hw = budget("h100_sxm_x1")
    assert hw.kind == "gpu" and hw.description == "1 x NVIDIA H100 80GB HBM3"
    assert hw.memory_bytes == 81559 * 2**20 and hw.bandwidth_bytes_s == 3.35e12


def test_eight_h100_with_nvlink():
    fp = fp_of("h100_sxm_x8_nvlink")
    assert fp["accelerator"] == "8 x NVIDIA H100 80GB HBM3" and fp["gpu_count"] == 8 and len(fp["gpus"]) == 8
    assert fp["gpu_interconnect"] == "NVLink" and fp["gpu_link_gb_s"] == 900.0
    assert gpu_text(fp) == ("8 x NVIDIA H100 80GB HBM3 over NVLink, compute 9.0, CUDA 12.2, driver 535.129.03")
    links = hardware.gpu_links(hardware.gpu_report(Recorded(recording("h100_sxm_x8_nvlink"))))
    assert len(links) == 28 and {ln.interconnect for ln in links} == {Interconnect.NVLINK}
    assert {(ln.a, ln.b): ln.pcie_path for ln in links}[(0, 7)] == "SYS"
    assert hardware.gpu_lines(fp)[-1] == "between GPUs: NVLink (900 GB/s, slowest pair)"
    hw = budget("h100_sxm_x8_nvlink")
    assert hw.memory_bytes == 8 * 81559 * 2**20 and hw.bandwidth_bytes_s == pytest.approx(8 * 3.35e12)


def test_two_rtx_4090_on_pcie():
    fp = fp_of("rtx4090_x2_pcie")
    assert fp["accelerator"] == "2 x NVIDIA GeForce RTX 4090" and fp["gpu_count"] == 2
    assert fp["gpu_interconnect"] == "PCIe (PHB)"
    assert fp["gpu_link_gb_s"] == round(pcie_bandwidth(4, 16) / 1e9, 1) == 63.0
    assert gpu_text(fp) == ("2 x NVIDIA GeForce RTX 4090 over PCIe (PHB), compute 8.9, CUDA 12.4, driver 550.107.02")
    assert budget("rtx4090_x2_pcie").bandwidth_bytes_s == 2 * 1.008e12
    assert hardware.gpu_lines(fp) == [
        "GPU 0: NVIDIA GeForce RTX 4090, 24.0 GiB, compute 8.9, 1008 GB/s (spec sheet)",
        "GPU 1: NVIDIA GeForce RTX 4090, 24.0 GiB, compute 8.9, 1008 GB/s (spec sheet)",
        "between GPUs: PCIe (PHB) (63 GB/s, slowest pair)",
    ]


def test_a_gpu_70_percent_used_by_another_process():
    fp = fp_of("a100_70pct_used")
    assert fp["accelerator"] == "1 x NVIDIA A100-SXM4-80GB"
    assert fp["gpu_notes"] == ["GPU 0: 70% of its memory in use by other processes"]
    assert gpu_text(fp).endswith("driver 535.161.08; GPU 0: 70% of its memory in use by other processes")
    hw = budget("a100_70pct_used")
    assert hw.free_bytes == pytest.approx(0.3 * hw.memory_bytes)
    # the same machine idle is the same hardware to a study (what the guard compares)
    idle = recording("a100_70pct_used")
    idle["devices"][0]["memory"]["free"] = idle["devices"][0]["memory"]["total"]
    fp_idle = hardware.fingerprint(Recorded(idle), cgroup=NO_CGROUP)
    assert "gpu_notes" not in fp_idle
    assert {k: fp_idle[k] for k in ("accelerator", "gpus")} == {k: fp[k] for k in ("accelerator", "gpus")}


def test_a_gpu_held_by_another_process_is_named():
    [holder] = hardware.gpu_holders([0], Recorded(recording("a100_70pct_used")), proc=Path("/nonexistent"))
    assert (holder.pid, holder.used_bytes, holder.name) == (4242, 56 * GiB, None)


def test_no_nvml_at_all_is_the_cpu():
    rec = Recorded(recording("no_nvml"))
    assert read(rec) is None and hardware.gpu_report(rec) == NvmlReport()
    fp = hardware.fingerprint(rec, cgroup=NO_CGROUP)
    assert fp["accelerator"] == "none (CPU)"
    assert not {"gpus", "gpu_count", "cuda", "gpu_driver"} & set(fp)
    assert gpu_text(fp) == "none (CPU)" and hardware.gpu_lines(fp) == []
    hw = detect_hardware(gpus=hardware.gpu_infos(hardware.gpu_report(rec)), ram=RAM)
    assert (hw.kind, hw.description, hw.memory_bytes, hw.free_bytes) == (
        "cpu",
        "CPU RAM (Test CPU)",
        64 * GiB,
        48 * GiB,
    )


def test_reading_the_real_machine_never_raises():
    report = hardware.gpu_report()
    assert isinstance(report, NvmlReport)
    assert hardware.fingerprint()["accelerator"] == hardware.accelerator(report)


def test_mixed_gpus_and_partial_nvlink():
    rec = recording("rtx4090_x2_pcie")
    other = {**rec["devices"][0], "name": "NVIDIA GeForce RTX 3090", "compute_capability": [8, 6]}
    rec["devices"].append(other)
    rec["pairs"] = {
        "0,1": {"p2p_nvlink": 0, "common_ancestor": 30},
        "0,2": {"p2p_nvlink": 5, "common_ancestor": 40},
    }  # 1,2: not recorded
    fp = hardware.fingerprint(Recorded(rec), cgroup=NO_CGROUP)
    assert fp["accelerator"] == "2 x NVIDIA GeForce RTX 4090, 1 x NVIDIA GeForce RTX 3090"
    assert fp["gpu_interconnect"] == "NVLink 0-1; PCIe (NODE) otherwise"
    assert "compute 8.9, compute 8.6" in hardware.describe(fp)


def test_a_gpu_failing_mid_read_keeps_the_ones_before_and_missing_facts_are_absent():
    rec = recording("h100_sxm_x8_nvlink")
    rec["devices"][0]["compute_capability"] = None
    rec["devices"][2]["name"] = None  # NVML errors on GPU 2: it and later ones are left out
    rec["cuda_driver_version"] = None
    report = hardware.gpu_report(Recorded(rec))
    assert [g.index for g in report.gpus] == [0, 1] and len(report.pairs) == 1
    assert report.gpus[0].compute_capability is None and report.cuda_version is None
    assert "CUDA" not in hardware.describe(hardware.fingerprint(Recorded(rec), cgroup=NO_CGROUP))


@pytest.mark.parametrize("name", ["h100_sxm_x1", "h100_sxm_x8_nvlink", "rtx4090_x2_pcie", "a100_70pct_used"])
def test_recordings_replay_what_record_captures(name):
    rec = recording(name)
    del rec["source"]
    assert record(Recorded(rec)) == rec


def test_describe_reads_older_fingerprints_unchanged():
    assert (
        hardware.describe({"cpu": "X", "cpus": 4, "memory_gib": 8.0, "accelerator": "none (CPU)"})
        == "X, 4 CPUs, 8.0 GiB RAM, none (CPU)"
    )
    assert (
        hardware.describe({"cpu": "X", "cpus": 64, "memory_gib": 512.0, "accelerator": "8 x H100"})
        == "X, 64 CPUs, 512.0 GiB RAM, 8 x H100"
    )


@pytest.mark.parametrize(
    "files,quota",
    [
        ({"cpu.max": "200000 100000\n"}, 2.0),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "150000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1.5),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_cgroup_cpu_quota(tmp_path, files, quota):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert hardware.cgroup_cpu_quota(tmp_path) == quota
    fp = hardware.fingerprint(Recorded(recording("no_nvml")), cgroup=tmp_path)
    assert fp.get("cpu_quota") == quota
    assert ("(quota" in hardware.describe(fp)) == (quota is not None)
    if quota is not None:
        assert f"CPUs (quota {quota:g})," in hardware.describe(fp)


def test_cgroup_memory_headroom(tmp_path):
    (tmp_path / "memory.max").write_text("1000\n")
    (tmp_path / "memory.current").write_text("400\n")
    assert hardware.cgroup_memory_headroom(tmp_path) == 600
    (tmp_path / "memory.max").write_text("max\n")
    assert hardware.cgroup_memory_headroom(tmp_path) is None
