"""The measurements the machine's other load disturbed, listed for people: the run's summary,
results.json, `kvtune show` and the report all list them from this one function.

A measurement is one launch's figures (the search's or the baseline's first measurement, or the
confirmation's re-measurement). The runner re-measures a disturbed one on the same server
(tuner/trial/disturbance.py); it is listed when any of its attempts was disturbed, with the worst
dropped or kept window's figure and reason, how many times it was measured again, and whether the
figures kept are still disturbed (then naming and the noise pool passed them over).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from kvtune.study.outcome import TrialOutcome


@dataclass(frozen=True)
class DisturbedMeasurement:
    trial: int
    measurement: str  # "first measurement" or "confirmation"
    foreign_cores: float | None
    why: str  # the monitor's reason: each threshold crossed, the top consumers
    remeasured: int  # times it was dropped and measured again
    still_disturbed: bool  # the figures kept are disturbed too: no evidence

    def text(self) -> str:
        if self.still_disturbed:
            fate = (
                f"still disturbed after {self.remeasured} re-measurement(s): kept, but no evidence"
                if self.remeasured
                else "not re-measured: kept, but no evidence"
            )
        else:
            fate = f"re-measured {self.remeasured}x, then quiet: the quiet figures are used"
        return f"trial {self.trial} ({self.measurement}): {self.why}; {fate}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _listed(trial: int, measurement: str, kept: dict | None, dropped: list[dict]) -> DisturbedMeasurement | None:
    still = bool((kept or {}).get("disturbed"))
    windows = dropped + ([kept] if still and kept else [])
    if not windows:
        return None
    worst = max(windows, key=lambda w: w.get("foreign_cores") or 0.0)
    return DisturbedMeasurement(
        trial, measurement, worst.get("foreign_cores"), worst.get("reason") or "disturbed", len(dropped), still
    )


def disturbed_measurements(outcomes: Sequence[TrialOutcome]) -> list[DisturbedMeasurement]:
    """Every disturbed measurement of `outcomes`, by trial (a confirmation's record is read when it
    carries ``interference`` / ``disturbed_attempts``, as the runner's outcome does)."""
    out = []
    for o in sorted(outcomes, key=lambda o: o.number):
        again = o.confirmation or {}
        for item in (
            _listed(o.number, "first measurement", o.interference, list(o.disturbed_attempts)),
            _listed(o.number, "confirmation", again.get("interference"), list(again.get("disturbed_attempts") or [])),
        ):
            if item is not None:
                out.append(item)
    return out
