"""Worker slots, the stored spec, the hardware guard and warm starts."""

import os
import sys

import pytest
import typer.main

from kvtune.errors import SpecError
from kvtune.launchers.base import Knob
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.spec import StudySpec
from kvtune.tuner.warmstart import adapt, enqueue_warm_start
from kvtune.tuner.workers import WorkerOptions, cpu_slot, gpu_slot, spec_from_dict, worker_argv
from tests.conftest import TINY


def test_cpu_slots_split_the_affinity_set():
    cpus = sorted(os.sched_getaffinity(0))
    assert cpu_slot(0, 1) is None
    slots = [cpu_slot(i, len(cpus)) for i in range(len(cpus))]
    assert set().union(*slots) == set(cpus) and all(len(s) == 1 for s in slots)


def test_gpu_slots():
    assert gpu_slot(0, 0) == {}
    assert gpu_slot(1, 2) == {"CUDA_VISIBLE_DEVICES": "2,3"}


def _worker_params(argv: list[str]) -> dict:
    """What `kvtune worker` parses from this argv (click's parser, nothing is run)."""
    from kvtune import cli

    assert argv[:4] == [sys.executable, "-m", "kvtune.cli", "worker"]
    command = typer.main.get_command(cli.app).commands["worker"]
    return command.make_context("worker", argv[4:]).params


def test_worker_argv_is_what_the_worker_command_parses():
    options = WorkerOptions(gpus_per_trial=2, runs_dir="/runs", llama_server="/bin/llama-server",
                            vllm_python="/venv/bin/python", allow_mixed_hardware=True)
    assert _worker_params(worker_argv("sqlite:///s.db", "st", 1, 3, options)) == {
        "storage": "sqlite:///s.db", "study": "st", "slot": 1, "slots": 3, "gpus_per_trial": 2,
        "runs_dir": "/runs", "llama_server": "/bin/llama-server", "vllm_python": "/venv/bin/python",
        "allow_mixed_hardware": True}
    defaults = _worker_params(worker_argv("sqlite:///s.db", "st", 2, 3, WorkerOptions()))
    assert defaults["slot"] == 2 and defaults["gpus_per_trial"] == 0 and defaults["allow_mixed_hardware"] is False
    assert defaults["runs_dir"] is defaults["llama_server"] is defaults["vllm_python"] is None


def test_spec_round_trips_through_the_study():
    spec = StudySpec(study="x", trials=5, workload=TINY, targets=["ttft<1s"], repeats=2).validate()
    assert spec_from_dict(spec.to_dict()) == spec


def test_study_refuses_other_hardware(make_tuner):
    tuner, _ = make_tuner()
    tuner.study.set_user_attr("hardware", {"cpu": "Other CPU", "cpus": 64, "memory_gib": 512.0,
                                           "accelerator": "8 x H100"})
    with pytest.raises(SpecError, match="measured on other hardware"):
        make_tuner()


def test_adapt_clamps_ranges_and_drops_unknown_choices():
    knobs = [Knob("threads", "int", low=1, high=4), Knob("parallel", "choices", choices=(1, 2)),
             Knob("fa", "fixed", value="on")]
    assert adapt({"threads": 16, "parallel": 8, "fa": "off", "gone": 1}, knobs) == {"threads": 4}
    assert adapt({"threads": 2, "parallel": 2}, knobs) == {"threads": 2, "parallel": 2}


def test_warm_start_queues_the_source_best_first(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))
    src, _ = make_tuner(StudySpec(study="src", trials=4, workload=TINY, objective="ttft_p95",
                                  confirm_top=0).validate(), launcher)
    src.run()
    dst, _ = make_tuner(StudySpec(study="dst", trials=3, workload=TINY, objective="ttft_p95",
                                  confirm_top=0).validate(), launcher)
    labels = enqueue_warm_start(dst.study, src.study, dst.space.knobs, top=2)
    assert labels and labels[0].startswith("src#")
    outcomes = dst.run()
    assert outcomes[0].baseline
    assert outcomes[1].warm_start == labels[0]
    best_src = min((o for o in src.outcomes() if o.feasible and not o.baseline), key=lambda o: o.objective)
    assert outcomes[1].candidate.flags == best_src.candidate.flags
    assert enqueue_warm_start(dst.study, src.study, dst.space.knobs) == []  # once per study
