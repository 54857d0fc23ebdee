"""Worker slots, the stored spec, the hardware guard and warm starts.

The tests here start no process; those that do are in tests/integration/tuner/fleet/test_workers.py."""

import os

import pytest

from kvtune.errors import SpecError
from kvtune.launchers.base import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.fleet.workers import check_gpu_slots, cpu_slot, gpu_pool, gpu_slot
from kvtune.tuner.search.warmstart import adapt
from tests.conftest import TINY
from tests.paths import NVML_DATA


def test_cpu_slots_split_the_affinity_set():
    cpus = sorted(os.sched_getaffinity(0))
    assert cpu_slot(0, 1) is None
    slots = [cpu_slot(i, len(cpus)) for i in range(len(cpus))]
    assert set().union(*slots) == set(cpus) and all(len(s) == 1 for s in slots)


def test_gpu_slots():
    eight = [str(i) for i in range(8)]
    assert gpu_slot(0, 0) == {}
    assert gpu_slot(1, 2, eight) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2,3"}
    assert gpu_slot(1, 1, ["5", "7"])["CUDA_VISIBLE_DEVICES"] == "7"  # cut from the parent's own set
    with pytest.raises(SpecError, match="needs 4 GPUs"):
        gpu_slot(1, 2, ["0", "1"])


def test_the_gpu_pool_is_the_parents_visible_set_else_every_gpu_nvml_sees():
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "2, 3"}, gpu_count=8) == ["2", "3"]
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "GPU-1a2b"}, gpu_count=8) == ["GPU-1a2b"]
    assert gpu_pool({}, gpu_count=2) == ["0", "1"]
    assert gpu_pool({}, gpu_count=0) == []


def test_gpus_per_trial_that_do_not_fit_are_one_line():
    check_gpu_slots(4, 2, [str(i) for i in range(8)])
    check_gpu_slots(3, 0, [])  # no GPUs asked for: nothing to check
    with pytest.raises(SpecError) as e:
        check_gpu_slots(1, 3, ["0", "1"])
    assert str(e.value) == (
        "--gpus-per-trial 3 x --workers 1 needs 3 GPUs, but this host has 2 GPU(s) "
        "visible (0, 1): lower --gpus-per-trial or --workers"
    )
    with pytest.raises(SpecError, match="no GPU visible"):
        check_gpu_slots(1, 1, [])


def test_spec_round_trips_through_the_study():
    spec = StudySpec(study="x", trials=5, workload=TINY, targets=["ttft<1s"], repeats=2).validate()
    assert StudySpec.from_dict(spec.to_dict()) == spec


def test_study_refuses_other_hardware(make_tuner):
    tuner, _ = make_tuner()
    tuner.study.set_user_attr(
        "hardware", {"cpu": "Other CPU", "cpus": 64, "memory_gib": 512.0, "accelerator": "8 x H100"}
    )
    with pytest.raises(SpecError, match="measured on other hardware"):
        make_tuner()


def test_adapt_clamps_ranges_and_drops_unknown_choices():
    knobs = [
        Knob("threads", "int", low=1, high=4),
        Knob("parallel", "choices", choices=(1, 2)),
        Knob("fa", "fixed", value="on"),
    ]
    assert adapt({"threads": 16, "parallel": 8, "fa": "off", "gone": 1}, knobs) == {"threads": 4}
    assert adapt({"threads": 2, "parallel": 2}, knobs) == {"threads": 2, "parallel": 2}


def _recorded_fingerprint(name: str, busy_free: int | None = None) -> dict:
    import json
    from pathlib import Path

    from kvtune import hardware
    from kvtune.nvml_recorded import Recorded

    rec = json.loads((NVML_DATA / f"{name}.json").read_text())
    if busy_free is not None:
        rec["devices"][0]["memory"]["free"] = busy_free
    return hardware.fingerprint(Recorded(rec), cgroup=Path("/nonexistent-cgroup"))


def test_the_guard_tells_an_a100_study_from_an_h100_one(tmp_path):
    """Same host otherwise: only the GPU differs (recorded NVML answers)."""
    from dataclasses import replace

    from kvtune.tuner.build import open_tuner, prepare

    spec = StudySpec(study="gpu", trials=2, workload=TINY).validate()
    base = prepare(spec, launcher=FakeLauncher(), runs_dir=str(tmp_path / "runs"))
    a100 = _recorded_fingerprint("a100_70pct_used")
    open_tuner(replace(base, hardware=a100))
    with pytest.raises(
        SpecError, match="measured on other hardware .*1 x NVIDIA A100-SXM4-80GB.*this is .*1 x NVIDIA H100 80GB HBM3"
    ):
        open_tuner(replace(base, hardware=_recorded_fingerprint("h100_sxm_x1")))
    # the same A100, idle now: the same hardware (how busy a GPU is does not change what it is)
    open_tuner(replace(base, hardware=_recorded_fingerprint("a100_70pct_used", busy_free=80 * 2**30)))
    open_tuner(replace(base, hardware=_recorded_fingerprint("h100_sxm_x1")), allow_mixed_hardware=True)
