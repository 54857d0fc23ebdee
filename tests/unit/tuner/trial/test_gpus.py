"""The GPUs a trial uses, billed and metered: CUDA_VISIBLE_DEVICES as CUDA reads it (indices,
UUIDs, the first invalid entry ending the list), the worker's slot over the shell's, the
backend's world size, and the energy of only those GPUs over only the measured phase.

NVML is the recorded 8 x H100 NVLink host (tests/unit/data/nvml) with a UUID per board added
here; energy counters and the clock are injected, so the joules expected are exact."""

from __future__ import annotations

import json

import pytest

from kvtune import hardware
from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.energy import EnergyReading, EnergySource, NvmlMeter
from kvtune.launchers.vllm.parallel import world_size
from kvtune.objectives.cost import Price
from kvtune.testing.nvml_recorded import Recorded
from kvtune.tuner.trial.measure import measure_repeats
from kvtune.tuner.trial.phase_window import MeteredBench, account
from kvtune.tuner.trial.trial_gpus import TrialGpus, trial_gpus, visible
from kvtune.workload import Workload
from tests.paths import NVML_DATA

WORKLOAD = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=3)


def _recording(**per_device: object) -> dict:
    rec = json.loads((NVML_DATA / "h100_sxm_x8_nvlink.json").read_text())
    for i, d in enumerate(rec["devices"]):
        d["uuid"] = f"GPU-{i:x}{i:x}aa1234-0000-4000-8000-00000000000{i}"
        d.update({k: (v(i) if callable(v) else v) for k, v in per_device.items()})
    return rec


DEVICES = hardware.gpu_report(Recorded(_recording())).gpus


def test_the_recorded_uuids_are_read() -> None:
    assert [d.uuid for d in DEVICES][:2] == [
        "GPU-00aa1234-0000-4000-8000-000000000000",
        "GPU-11aa1234-0000-4000-8000-000000000001",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, list(range(8))),
        ("4,5", [4, 5]),
        (" 6 , 2 ", [6, 2]),  # CUDA's order, not NVML's
        ("1,9,2", [1]),  # an index past the last GPU ends the list, as in CUDA
        ("GPU-33aa,GPU-11", [3, 1]),  # a unique UUID prefix names a GPU
        ("GPU-", []),  # a prefix every UUID shares names none: the list ends
        ("GPU-ffff", []),
        ("MIG-4b1c", [None]),  # a MIG instance: visible, no NVML board of its own
        ("", []),
    ],
)
def test_visible_reads_cuda_visible_devices_as_cuda_does(value, expected) -> None:
    assert visible(value, DEVICES) == expected


def test_without_nvml_the_entries_are_counted_but_not_meterable() -> None:
    assert trial_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}, None, ()) == TrialGpus(2, None)
    assert trial_gpus({}, None, ()) == TrialGpus(0, ())


def test_a_tp1_trial_on_an_8_gpu_box_is_billed_for_one() -> None:
    price = Price(2.0, per_gpu=True)
    all_of_them = trial_gpus({}, None, DEVICES)  # llama-server: every GPU it sees
    tp1 = trial_gpus({}, world_size({"tensor-parallel-size": 1}), DEVICES)
    tp4 = trial_gpus({}, world_size({"tensor-parallel-size": 2}, ["--pipeline-parallel-size", "2"]), DEVICES)
    assert (price.hourly(all_of_them.count), price.hourly(tp1.count), price.hourly(tp4.count)) == (16.0, 2.0, 8.0)
    assert tp1.indices == (0,) and tp4.indices == (0, 1, 2, 3)


def test_the_worker_slot_wins_over_the_shell_and_the_world_takes_its_first_gpus() -> None:
    shell = {"CUDA_VISIBLE_DEVICES": "GPU-44,GPU-55,GPU-66,GPU-77"}
    slot = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "GPU-66,GPU-77"}
    assert trial_gpus(shell, None, DEVICES) == TrialGpus(4, (4, 5, 6, 7))
    assert trial_gpus({**shell, **slot}, world_size({"tensor-parallel-size": 1}), DEVICES) == TrialGpus(1, (6,))
    assert trial_gpus({"CUDA_VISIBLE_DEVICES": "MIG-4b1c"}, 1, DEVICES) == TrialGpus(1, None)
    assert not TrialGpus(1, None).meterable and TrialGpus(0, ()).meterable


@pytest.mark.parametrize(
    ("flags", "extra", "expected"),
    [
        ({}, [], 1),
        ({"tensor-parallel-size": 4}, [], 4),
        ({"tensor-parallel-size": 2}, ["--data-parallel-size=2", "-pp", "2"], 8),
        ({"tensor-parallel-size": 2}, ["--tensor-parallel-size", "8"], 2),  # the tuned knob wins
        ({"tensor-parallel-size": "x"}, [], 1),  # precheck refuses it: never billed as more
    ],
)
def test_vllm_world_size(flags, extra, expected) -> None:
    assert world_size(flags, extra) == expected


class Clock:
    """Advanced by hand; the meter reads it at start and stop."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class PhasedBench:
    """Reports warm-up then measuring as the real client does, and advances the clock through
    each phase (the recorded energy counters say what the GPUs used)."""

    def __init__(self, clock: Clock):
        self.clock = clock

    def __call__(self, base_url: str, w: Workload, options: BenchOptions) -> BenchRun:
        assert options.on_phase is not None
        options.on_phase("warmup")
        self.clock.now += 30.0  # warm-up: 30 s the joules must not include
        options.on_phase("measuring")
        self.clock.now += 10.0
        return BenchRun([], [], 10.0, {"output_throughput": 50.0}, mode=w.mode)


def test_energy_reads_only_the_trials_gpus_over_only_the_measured_phase() -> None:
    # each GPU's counter: open() probes once, start() reads, stop() reads. GPU 6 (the trial's)
    # uses 3 kJ in the measured 10 s (300 W); the others would add 7 x 50 kJ if they were read.
    rec = Recorded(_recording(energy_mj=lambda i: [1_000_000, 1_000_000, 4_000_000 if i == 6 else 51_000_000]))
    gpus = trial_gpus({"CUDA_VISIBLE_DEVICES": "GPU-66,GPU-77"}, world_size({"tensor-parallel-size": 1}), DEVICES)
    clock = Clock()
    meter = NvmlMeter.open(rec, gpus.indices, clock=clock)
    assert meter is not None and meter.gpus == (6,)
    bench = MeteredBench(PhasedBench(clock), meter)
    measured = account(measure_repeats(bench, "http://x", WORKLOAD, 1, BenchOptions("m")), bench, None)
    [reading] = bench.readings.values()
    assert reading == EnergyReading(3000.0, 10.0, EnergySource.NVML_COUNTER)
    assert measured.metrics["avg_watts"] == pytest.approx(300.0)
    assert measured.metrics["joules_per_output_token"] == pytest.approx(6.0)  # 300 W / 50 tok/s


def test_a_run_that_never_reaches_its_measured_phase_has_no_reading() -> None:
    class Started:
        source = EnergySource.RAPL
        starts = 0

        def start(self) -> None:
            self.starts += 1

        def stop(self) -> EnergyReading:
            raise AssertionError("stopped a meter that never started")

    def fails_in_warmup(base_url: str, w: Workload, options: BenchOptions) -> BenchRun:
        assert options.on_phase is not None
        options.on_phase("warmup")
        raise ConnectionError("server went away")

    meter = Started()
    with pytest.raises(ConnectionError):
        MeteredBench(fails_in_warmup, meter)("http://x", WORKLOAD, BenchOptions("m"))
    assert meter.starts == 0
