"""A window around each benchmark run's measured phase: the energy meter's and the interference
watch's.

Both must see what the metrics describe and nothing else: the window opens at the client's
"measuring" phase, so the warm-up (and the server's start-up before it: a config's own start-up
work is neither its energy per token nor interference) is left out, and closes when the run
returns, however it returns. `PhaseWindow` is that wrapper once, over anything with `start()`
and `stop()` (an `energy.Meter`, an `interference.Watch`); each run's closed window is kept by
id(BenchRun). `MeteredBench` and `WatchedBench` name what each window is for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Generic, Protocol, Sequence, TypeVar

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.energy import EnergyReading, Meter, combine, energy_metrics
from kvtune.interference.observed import Interference, Watch
from kvtune.objectives.cost import cost_metrics
from kvtune.tuner.trial.measure import Bench, Measurement
from kvtune.workload import Workload

T = TypeVar("T", covariant=True)
W = TypeVar("W")


class Window(Protocol[T]):
    def start(self) -> None: ...
    def stop(self) -> T | None: ...  # None: nothing was read in the window


class PhaseWindow(Generic[W]):
    """A `Bench` that opens `window` at each run's measured phase and closes it when the run
    returns; without a window it only passes the calls on."""

    def __init__(self, bench: Bench, window: Window[W] | None):
        self.bench, self.window = bench, window
        self.windows: dict[int, W] = {}  # id(BenchRun) -> its closed window

    def __call__(self, base_url: str, workload: Workload, options: BenchOptions) -> BenchRun:
        window = self.window
        if window is None:
            return self.bench(base_url, workload, options)
        opened = False
        heard = options.on_phase

        def on_phase(phase: str) -> None:
            nonlocal opened
            if phase == "measuring" and not opened:
                window.start()
                opened = True
            if heard is not None:
                heard(phase)

        try:
            run = self.bench(base_url, workload, replace(options, on_phase=on_phase))
        finally:
            closed = window.stop() if opened else None
        if closed is not None:
            self.windows[id(run)] = closed
        return run

    def of(self, run: BenchRun) -> W | None:
        """`run`'s window (None: it never reached its measured phase, or nothing was read)."""
        return self.windows.get(id(run))


class MeteredBench(PhaseWindow[EnergyReading]):
    """The energy of each run's measured phase (energy.py), which the joules per token are
    divided by the metrics of."""

    def __init__(self, bench: Bench, meter: Meter | None):
        super().__init__(bench, meter)
        self.meter = meter

    @property
    def readings(self) -> dict[int, EnergyReading]:
        return self.windows


def account(m: Measurement, bench: MeteredBench, usd_per_hour: float | None) -> Measurement:
    """Add energy (over the runs the metrics are from) and cost per 1M tokens to the metrics."""
    if bench.meter is not None:
        runs = m.chosen if m.chosen is not None else m.bench_runs
        reading = combine(bench.of(r) for r in runs)
        m.metrics.update(energy_metrics(reading, m.metrics.get("output_throughput")))
    if usd_per_hour is not None:
        m.metrics.update(cost_metrics(m.metrics, usd_per_hour))
    return m


class WatchedBench(PhaseWindow[Interference]):
    """The machine's other load during each run's measured phase (kvtune.interference);
    `worst()` is the window a measurement is judged by."""

    def __init__(self, bench: Bench, watch: Watch):
        super().__init__(bench, watch)

    def worst(self, runs: Sequence[BenchRun]) -> Interference | None:
        """The window of `runs` with the most interference: a disturbed one before a quiet one,
        then the most foreign CPU. None when no run was watched."""
        windows = [w for r in runs if (w := self.of(r)) is not None]
        if not windows:
            return None
        return max(windows, key=lambda w: (w.disturbed, w.foreign_cores or 0.0))
