"""Is the machine busy with something else? The interference monitor (a window's foreign CPU,
steal, pressure and other GPU processes, judged against documented thresholds) and the
pre-flight check before the baseline. See `monitor` for what is measured, `record` for the
thresholds and their reasons."""

from kvtune.interference.monitor import Monitor
from kvtune.interference.observed import Consumer, GpuOther, Interference, Watch, foreign_cores_threshold
from kvtune.interference.preflight import preflight, warning

__all__ = [
    "Monitor",
    "preflight",
    "warning",
    "Interference",
    "Consumer",
    "GpuOther",
    "foreign_cores_threshold",
    "Watch",
]
