"""Energy readers against recorded answers: RAPL in a fake sysfs directory (wrap-around, root-only
counters, absent powercap), NVML through `nvml_recorded.Recorded` (the energy counter, else power samples
integrated), and the words a trial's figures become."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kvtune.energy import (
    AVG_WATTS,
    ENERGY_J,
    ENERGY_SOURCE,
    JOULES_PER_OUTPUT_TOKEN,
    NOT_MEASURABLE,
    EnergyReading,
    EnergySource,
    NvmlMeter,
    RaplMeter,
    combine,
    describe,
    energy_metrics,
    open_meter,
)
from kvtune.testing.nvml_recorded import Recorded
from tests.paths import NVML_DATA

DATA = NVML_DATA


class Clock:
    def __init__(self, *times: float):
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


class ManualTicker:
    """Ticks only when the test says so: no thread, no sleep."""

    def __init__(self) -> None:
        self.fn = None
        self.stopped = False

    def start(self, fn, interval_s: float) -> None:
        self.fn = fn

    def stop(self) -> None:
        self.stopped = True

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            self.fn()


def _rapl(root: Path, name: str, uj: int | None, max_uj: int = 262143328850) -> Path:
    d = root / name
    d.mkdir(parents=True)
    if uj is not None:
        (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def test_rapl_sums_the_packages_and_handles_a_wrap(tmp_path) -> None:
    p0 = _rapl(tmp_path, "intel-rapl:0", 1_000_000)
    p1 = _rapl(tmp_path, "intel-rapl:1", 999_000_000, max_uj=1_000_000_000)
    core = _rapl(tmp_path, "intel-rapl:0:0", 5)  # a part of package 0: never added again
    meter = RaplMeter.open(tmp_path, clock=Clock(10.0, 12.0))
    assert meter is not None and [d.name for d in meter.domains] == ["intel-rapl:0", "intel-rapl:1"]
    meter.start()
    (p0 / "energy_uj").write_text("61000000\n")  # +60 J
    (p1 / "energy_uj").write_text("4000000\n")  # wrapped: +1 J to the top, +4 J after
    (core / "energy_uj").write_text("999999999\n")
    reading = meter.stop()
    assert reading == EnergyReading(65.0, 2.0, EnergySource.RAPL)
    assert reading.watts == pytest.approx(32.5)


def test_rapl_absent_or_root_only_is_no_meter(tmp_path) -> None:
    assert RaplMeter.open(tmp_path / "no-powercap") is None
    _rapl(tmp_path, "intel-rapl:0", None)  # energy_uj not there / not readable
    assert RaplMeter.open(tmp_path) is None
    if os.geteuid() != 0:  # root reads a 0400 file anyway
        d = tmp_path / "intel-rapl:0"
        (d / "energy_uj").write_text("1\n")
        os.chmod(d / "energy_uj", 0o000)
        assert RaplMeter.open(tmp_path) is None


def _recorded(name: str, **device: object) -> Recorded:
    rec = json.loads((DATA / name).read_text())
    for d in rec.get("devices") or []:
        d.update(device)
    return Recorded(rec)


def test_nvml_energy_counter_over_the_window() -> None:
    rec = _recorded("h100_sxm_x1.json", energy_mj=[5_000_000, 5_000_000, 5_700_000])
    meter = NvmlMeter.open(rec, None, clock=Clock(1.0, 3.0))  # the probe reads the counter once
    assert meter is not None and meter.source is EnergySource.NVML_COUNTER
    meter.start()
    assert meter.stop() == EnergyReading(700.0, 2.0, EnergySource.NVML_COUNTER)  # 350 W


def test_nvml_power_samples_are_integrated_when_there_is_no_counter() -> None:
    ticker = ManualTicker()
    # probe 1 sample; then the window: 100 W at t=0, 300 W at t=1, 300 W at t=2 (the stop)
    rec = _recorded("h100_sxm_x1.json", power_mw=[50_000, 100_000, 300_000, 300_000])
    meter = NvmlMeter.open(rec, [0], clock=Clock(0.0, 0.0, 1.0, 2.0), ticker=ticker)
    assert meter is not None and meter.source is EnergySource.NVML_POWER
    meter.start()
    ticker.tick()
    reading = meter.stop()
    assert ticker.stopped
    # trapezoids: (100+300)/2 * 1 + (300+300)/2 * 1 = 500 J over 2 s
    assert reading == EnergyReading(500.0, 2.0, EnergySource.NVML_POWER)


def test_nvml_only_the_trials_gpus() -> None:
    rec = _recorded("h100_sxm_x8_nvlink.json", energy_mj=1000)
    meter = NvmlMeter.open(rec, [2, 3])
    assert meter is not None and meter.gpus == (2, 3)
    assert NvmlMeter.open(rec, [8]) is None  # not a GPU of this machine


def test_no_nvml_and_no_rapl_means_not_measurable(tmp_path) -> None:
    no_gpu = Recorded(json.loads((DATA / "no_nvml.json").read_text()))
    assert NvmlMeter.open(no_gpu) is None
    # a GPU whose driver reports neither energy nor power (recordings without the two answers)
    assert NvmlMeter.open(Recorded(json.loads((DATA / "h100_sxm_x1.json").read_text()))) is None
    assert open_meter(None, nvml=no_gpu, rapl_root=tmp_path / "absent") is None
    assert describe({}) == NOT_MEASURABLE == "energy: not measurable on this machine"


def test_energy_metrics_and_words() -> None:
    m = energy_metrics(EnergyReading(500.0, 2.0, EnergySource.NVML_POWER), output_throughput=125.0)
    # 250 W / 125 tok/s = 2 J per output token
    assert m == {ENERGY_J: 500.0, AVG_WATTS: 250.0, ENERGY_SOURCE: 2.0, JOULES_PER_OUTPUT_TOKEN: 2.0}
    assert describe(m) == "energy: 2 J/output token, 250.0 W average (NVML board power, sampled every 0.1 s)"
    assert energy_metrics(None, 100.0) == {}
    assert combine(
        [EnergyReading(1.0, 1.0, EnergySource.RAPL), EnergyReading(3.0, 1.0, EnergySource.RAPL)]
    ) == EnergyReading(4.0, 2.0, EnergySource.RAPL)
    assert combine([EnergyReading(1.0, 1.0, EnergySource.RAPL), None]) is None


def test_a_power_read_failing_mid_window_gives_no_reading_and_stops_the_sampler() -> None:
    ticker = ManualTicker()
    rec = _recorded("h100_sxm_x1.json", power_mw=[50_000, 100_000, None])
    meter = NvmlMeter.open(rec, [0], clock=Clock(0.0, 0.0, 1.0, 2.0), ticker=ticker)
    meter.start()
    ticker.tick()  # the driver stops answering
    assert meter.stop() is None and ticker.stopped
