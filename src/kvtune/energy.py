"""Energy per token, measured where the machine lets us: NVML on NVIDIA GPUs, RAPL on CPUs.

A measured figure or none, never an estimate: a trial's GPUs are read through NVML (the board's
energy counter, ``nvmlDeviceGetTotalEnergyConsumption`` in mJ, where the driver has it; else
board power, ``nvmlDeviceGetPowerUsage`` in mW, sampled on a thread during the measurement and
integrated with the trapezoid rule); a CPU-only host is read through Linux RAPL
(``/sys/class/powercap/intel-rapl:N/energy_uj``, the package domains only, since the
sub-domains are parts of them; a counter that wrapped during the window adds
``max_energy_range_uj``). Where neither is readable (no GPU, no powercap, or an ``energy_uj``
only root may read) there is no meter and the summary says "energy: not measurable on this
machine".

Every reader is a `Meter` (start, stop -> `EnergyReading`); the tuner meters each benchmark
run (tuner/measure.py). Tests inject recorded NVML answers (`nvml_recorded.Recorded`), a fake sysfs
directory, a fake clock and a manual `Ticker` instead of patching anything.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from kvtune import nvml as nvml_mod

NOT_MEASURABLE = "energy: not measurable on this machine"
RAPL_ROOT = Path("/sys/class/powercap")
POWER_SAMPLE_S = 0.1
# The metrics keys a metered trial carries.
ENERGY_J = "energy_j"
AVG_WATTS = "avg_watts"
JOULES_PER_OUTPUT_TOKEN = "joules_per_output_token"
ENERGY_SOURCE = "energy_source"  # an `EnergySource` value (metrics hold numbers only)


class EnergySource(IntEnum):
    NVML_COUNTER = 1  # the GPUs' own energy counters
    NVML_POWER = 2  # GPU board power samples, integrated
    RAPL = 3  # the CPU packages' RAPL counters

    def describe(self) -> str:
        return {
            EnergySource.NVML_COUNTER: "NVML energy counter (GPU boards)",
            EnergySource.NVML_POWER: "NVML board power, sampled every 0.1 s",
            EnergySource.RAPL: "Linux RAPL (CPU packages)",
        }[self]


@dataclass(frozen=True)
class EnergyReading:
    joules: float
    seconds: float
    source: EnergySource

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if self.seconds > 0 else None


class Meter(Protocol):
    source: EnergySource

    def start(self) -> None: ...
    def stop(self) -> EnergyReading | None: ...  # None: a read failed during the window


def combine(readings: Iterable[EnergyReading | None]) -> EnergyReading | None:
    """Several windows (the repeats of one measurement) as one; None if any is missing."""
    rs = list(readings)
    known = [r for r in rs if r is not None]
    if not rs or len(known) < len(rs):
        return None
    return EnergyReading(sum(r.joules for r in known), sum(r.seconds for r in known), known[0].source)


def energy_metrics(reading: EnergyReading | None, output_throughput: float | None) -> dict[str, float]:
    """The energy keys of one trial: joules, average watts over the measured window, and joules
    per output token = average watts / output tokens per second of the measured requests."""
    if reading is None or reading.watts is None:
        return {}
    out = {ENERGY_J: reading.joules, AVG_WATTS: reading.watts, ENERGY_SOURCE: float(reading.source)}
    if output_throughput and output_throughput > 0:
        out[JOULES_PER_OUTPUT_TOKEN] = reading.watts / output_throughput
    return out


def describe(metrics: dict[str, float] | None) -> str:
    """``energy: 0.52 J/output token, 210 W average (NVML ...)`` or the not-measurable line."""
    m = metrics or {}
    if m.get(AVG_WATTS) is None:
        return NOT_MEASURABLE
    per_token = m.get(JOULES_PER_OUTPUT_TOKEN)
    source = m.get(ENERGY_SOURCE)
    named = f" ({EnergySource(int(source)).describe()})" if source in set(EnergySource) else ""
    tok = f"{per_token:.3g} J/output token, " if per_token is not None else ""
    return f"energy: {tok}{m[AVG_WATTS]:.1f} W average{named}"


# ---- RAPL ----------------------------------------------------------------------------------
_PACKAGE = re.compile(r"^intel-rapl:\d+$")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


@dataclass
class RaplMeter:
    """The CPU packages' RAPL counters (µJ), summed; a counter that wrapped adds its range."""

    domains: list[Path]
    clock: Callable[[], float] = time.monotonic
    source: EnergySource = EnergySource.RAPL
    _start: list[int] = field(default_factory=list)
    _t0: float = 0.0

    @classmethod
    def open(cls, root: Path = RAPL_ROOT, clock: Callable[[], float] = time.monotonic) -> "RaplMeter | None":
        """None when no package domain's energy_uj is readable (absent, or root-only)."""
        try:
            dirs = sorted(p for p in root.iterdir() if _PACKAGE.match(p.name))
        except OSError:
            return None
        readable = [d for d in dirs if _read_int(d / "energy_uj") is not None]
        return cls(readable, clock) if readable else None

    def _read(self) -> list[int] | None:
        values = [_read_int(d / "energy_uj") for d in self.domains]
        return None if any(v is None for v in values) else values  # type: ignore[return-value]

    def start(self) -> None:
        self._start = self._read() or []
        self._t0 = self.clock()

    def stop(self) -> EnergyReading | None:
        end, seconds = self._read(), self.clock() - self._t0
        if end is None or len(end) != len(self._start):
            return None
        total = 0
        for d, a, b in zip(self.domains, self._start, end):
            delta = b - a
            if delta < 0:  # wrapped: the counter restarts at 0 after max_energy_range_uj
                span = _read_int(d / "max_energy_range_uj")
                if span is None:
                    return None
                delta += span
            total += delta
        return EnergyReading(total / 1e6, seconds, self.source)


# ---- NVML ----------------------------------------------------------------------------------
class Ticker(Protocol):
    """Calls `fn` every `interval_s` between start and stop (a thread; tests tick by hand)."""

    def start(self, fn: Callable[[], None], interval_s: float) -> None: ...
    def stop(self) -> None: ...


class ThreadTicker:
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, fn: Callable[[], None], interval_s: float) -> None:
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                fn()

        self._thread = threading.Thread(target=loop, name="kvtune-power", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


@dataclass
class NvmlMeter:
    """The trial's GPUs through NVML: their energy counters, or their board power integrated.
    NVML is started at `start` and shut down at `stop` (its init is reference-counted)."""

    nvml: nvml_mod.Nvml
    gpus: tuple[int, ...]
    source: EnergySource
    clock: Callable[[], float] = time.monotonic
    ticker: Ticker = field(default_factory=ThreadTicker)
    _handles: list[Any] = field(default_factory=list)
    _start_mj: list[int] = field(default_factory=list)
    _samples: list[tuple[float, float]] = field(default_factory=list)  # (time, watts)
    _failed: bool = False
    _ticking: bool = False
    _t0: float = 0.0

    @classmethod
    def open(
        cls,
        nvml: nvml_mod.Nvml | None = None,
        gpus: Iterable[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        ticker: Ticker | None = None,
    ) -> "NvmlMeter | None":
        """A meter for `gpus` (None: every GPU NVML sees); None when NVML cannot start, there is
        no GPU, or the driver reports neither energy nor power for one of them."""
        with nvml_mod.opened(nvml) as nv:
            if nv is None:
                return None
            try:
                count = nv.nvmlDeviceGetCount()
                chosen = tuple(sorted(set(range(count) if gpus is None else gpus)))
                if not chosen or any(i >= count for i in chosen):
                    return None
                handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in chosen]
                if all(_works(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h)) for h in handles):
                    source = EnergySource.NVML_COUNTER
                elif all(_works(lambda: nv.nvmlDeviceGetPowerUsage(h)) for h in handles):
                    source = EnergySource.NVML_POWER
                else:
                    return None
            except Exception:
                return None
        return cls(nv, chosen, source, clock, ticker or ThreadTicker())

    def _watts(self) -> float:
        return sum(self.nvml.nvmlDeviceGetPowerUsage(h) for h in self._handles) / 1000.0

    def _sample(self) -> None:
        try:
            self._samples.append((self.clock(), self._watts()))
        except Exception:
            self._failed = True

    def start(self) -> None:
        self._failed, self._samples, self._start_mj = False, [], []
        try:
            self.nvml.nvmlInit()
            self._handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in self.gpus]
            if self.source is EnergySource.NVML_COUNTER:
                self._start_mj = [int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles]
        except Exception:
            self._failed = True
        self._t0 = self.clock()
        if self.source is EnergySource.NVML_POWER and not self._failed:
            self._sample()
            self.ticker.start(self._sample, POWER_SAMPLE_S)
            self._ticking = True

    def stop(self) -> EnergyReading | None:
        try:
            if self.source is EnergySource.NVML_POWER:
                if self._ticking:
                    self.ticker.stop()
                    self._ticking = False
                    self._sample()
                return None if self._failed else _integrate(self._samples, self.source)
            if self._failed:
                return None
            try:
                end = [int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles]
            except Exception:
                return None
            seconds = self.clock() - self._t0
            return EnergyReading(sum(b - a for a, b in zip(self._start_mj, end)) / 1000.0, seconds, self.source)
        finally:
            _quietly(self.nvml.nvmlShutdown)


def _integrate(samples: list[tuple[float, float]], source: EnergySource) -> EnergyReading | None:
    """Trapezoid rule over (time, watts) samples; None with fewer than two."""
    if len(samples) < 2:
        return None
    joules = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(samples, samples[1:]))
    return EnergyReading(joules, samples[-1][0] - samples[0][0], source)


def _works(call: Callable[[], Any]) -> bool:
    try:
        call()
        return True
    except Exception:
        return False


def _quietly(call: Callable[[], Any]) -> None:
    try:
        call()
    except Exception:
        pass


def open_meter(
    gpus: Iterable[int] | None = None, nvml: nvml_mod.Nvml | None = None, rapl_root: Path = RAPL_ROOT
) -> Meter | None:
    """The meter for a trial: its GPUs through NVML when there are GPUs (`gpus` None: all),
    else the CPU packages through RAPL; None when neither can be read here."""
    meter: Meter | None = NvmlMeter.open(nvml, gpus)
    return meter if meter is not None else RaplMeter.open(rapl_root)


if __name__ == "__main__":  # what this machine can measure: python -m kvtune.energy
    m = open_meter()
    print(NOT_MEASURABLE if m is None else f"energy: {m.source.describe()}")
