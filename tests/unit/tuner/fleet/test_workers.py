"""Worker slots, the stored spec, the hardware guard and warm starts.

The tests here start no process; those that do are in tests/integration/tuner/fleet/test_workers.py."""

import os

import pytest

from kvtune.errors import SpecError
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.fleet.workers import SchedulerTask, scheduler_task, seat
from kvtune.tuner.search.warmstart import adapt
from kvtune.tuner.trial.slots import check_gpu_slots, cpu_slot, gpu_pool, gpu_slot
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
    from kvtune.testing.nvml_recorded import Recorded

    rec = json.loads((NVML_DATA / f"{name}.json").read_text())
    if busy_free is not None:
        rec["devices"][0]["memory"]["free"] = busy_free
    return hardware.fingerprint(Recorded(rec), cgroup=Path("/nonexistent-cgroup"))


def test_the_guard_tells_an_a100_study_from_an_h100_one(tmp_path):
    """Same host otherwise: only the GPU differs (recorded NVML answers)."""
    from dataclasses import replace

    from kvtune.tuner.assemble import open_tuner, prepare

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


# ---- placed by a scheduler ------------------------------------------------------------------------
def test_the_scheduler_task_is_read_from_its_environment():
    k8s = scheduler_task({"JOB_COMPLETION_INDEX": "3", "HOSTNAME": "kvtune-s-3-abcde"})
    assert k8s == SchedulerTask("kubernetes", 3, "kvtune-s-3-abcde")
    array = scheduler_task({"SLURM_JOB_ID": "118", "SLURM_ARRAY_JOB_ID": "117", "SLURM_ARRAY_TASK_ID": "1"})
    assert array == SchedulerTask("slurm", 1, "117")
    assert scheduler_task({"SLURM_JOB_ID": "42"}) == SchedulerTask("slurm", 0, "42")  # no array: task 0
    assert scheduler_task({"CUDA_VISIBLE_DEVICES": "0"}) is None
    with pytest.raises(SpecError, match="JOB_COMPLETION_INDEX='x' is not a task index"):
        scheduler_task({"JOB_COMPLETION_INDEX": "x"})


def test_a_kubernetes_index_names_the_worker_but_picks_no_device():
    """Pod 3 of an Indexed Job with one GPU sees that GPU as 0: it runs there, not on GPU 3."""
    task = scheduler_task({"JOB_COMPLETION_INDEX": "3"})
    where = seat(0, 1, 1, task, pool=["0"])
    assert where.slot == 3  # its name, pid file and sampler seed
    assert where.cpus is None and where.device_env["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_slurm_task_runs_on_the_gpus_slurm_set():
    task = SchedulerTask("slurm", 2, "117")
    where = seat(0, 1, 2, task, pool=gpu_pool({"CUDA_VISIBLE_DEVICES": "5,7"}))
    assert (where.slot, where.cpus, where.device_env["CUDA_VISIBLE_DEVICES"]) == (2, None, "5,7")
    assert seat(0, 1, 0, task, pool=[]).device_env == {}  # a CPU study: nothing pinned
    with pytest.raises(SpecError, match="needs 2 GPUs"):
        seat(0, 1, 2, task, pool=["4"])  # fewer than the study's trials use


def test_under_a_scheduler_slots_are_refused_and_without_one_they_cut_the_host():
    with pytest.raises(SpecError, match="drop --slot and --slots"):
        seat(1, 2, 0, SchedulerTask("slurm", 0, "9"))
    on_host = seat(1, 2, 1, None, pool=["0", "1"])
    assert (on_host.slot, on_host.device_env["CUDA_VISIBLE_DEVICES"]) == (1, "1")


def test_a_slurm_task_that_sees_more_cpus_than_granted_is_warned():
    from kvtune.tuner.fleet.workers import unbound_cpus_warning

    slurm = {"SLURM_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "1", "SLURM_CPUS_PER_TASK": "2"}
    line = unbound_cpus_warning(slurm, process_cpus=8)
    assert line is not None and "granted this task 2 CPU(s) but it may run on 8" in line and "\n" not in line
    assert unbound_cpus_warning(slurm, process_cpus=2) is None  # bound to what it was granted
    assert unbound_cpus_warning({**slurm, "SLURM_CPUS_PER_TASK": ""}, process_cpus=8) is None  # no --cpus-per-task
    assert unbound_cpus_warning({"SLURM_CPUS_PER_TASK": "2"}, process_cpus=8) is None  # not a Slurm job
