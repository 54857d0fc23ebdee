"""Pre-flight: a few seconds of watching before the baseline, and the warning when the machine is
already busy.

The baseline is what every relative target and every "vs baseline" figure is measured against,
so a baseline measured while something else runs skews the whole study (the issue's demo:
14.94 tok/s under a package install, 48.1 tok/s once it ended). Before it, kvtune samples the
machine with nothing of its own running and, when the window is disturbed, says so naming who
is using it. `preflight` runs the window (its `sleep` is injected, so tests move a fake clock);
`warning` is the paragraph for people, None for a quiet machine.
"""

from __future__ import annotations

import time
from typing import Callable

from kvtune.interference.observed import Interference, Watch

PREFLIGHT_S = 3.0


def preflight(
    monitor: Watch, seconds: float = PREFLIGHT_S, sleep: Callable[[float], None] = time.sleep
) -> Interference | None:
    """Watch the machine for `seconds` with `monitor` (built with no server: nothing of kvtune's
    is running yet but kvtune itself) and return what it saw (None: it watched nothing)."""
    monitor.start()
    try:
        sleep(seconds)
    finally:
        result = monitor.stop()
    return result


def warning(result: Interference | None) -> str | None:
    """One paragraph naming the top consumers when the pre-flight window was disturbed."""
    if result is None or not result.disturbed:
        return None
    who = [c.describe() for c in result.top[:3]]
    who += [g.describe() for g in result.gpu_others[:3]]
    unattributed = ""
    if result.foreign_cores is not None:
        named = sum(c.cpu_pct for c in result.top) / 100.0
        if result.foreign_cores - named > 0.25:
            unattributed = (
                f" About {result.foreign_cores - named:.1f} cores of it belong to no process "
                "visible here (short-lived jobs, or another container on the same cores)."
            )
    return (
        f"This machine is already busy ({'; '.join(result.crossed)}, over "
        f"{result.seconds:.0f} s before the baseline). "
        + (f"Top consumers: {', '.join(who)}. " if who else "")
        + unattributed.lstrip()
        + (" " if unattributed else "")
        + "Measurements taken while it lasts are slower than this machine can serve and are "
        "marked disturbed; for a clean study, wait for it to finish or stop it."
    )
