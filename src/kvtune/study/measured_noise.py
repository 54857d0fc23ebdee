"""A study's measured noise, from its trial outcomes: what every printed "+/-" rests on.

A config's repeated measurements are its first measurement and its confirmation
re-measurements (`TrialOutcome.confirmation`, each valid entry of its "runs"), each one launch of a fresh server, plus the spread
of its ``--repeats`` runs on one server (`TrialOutcome.spread`, a coefficient of variation, with
``metrics["repeats"]`` runs). `objectives.noise` pools them; this module only reads them out of
the record, so the run's summary, results.json, `kvtune show` and the report compute the same
figure from the same trials. Duplicates (a replay of an earlier trial) and failed measurements
are not repeats, and neither is a measurement that stayed disturbed (the machine was busy with
something else, `TrialOutcome.disturbed`, or ``"disturbed"`` in the confirmation's record): its
spread is the other load's, not the config's.
"""

from __future__ import annotations

from typing import Sequence

from kvtune.objectives.noise import Noise, study_noise
from kvtune.study.outcome import TrialOutcome

OBJECTIVE = "objective"  # the key under which the study's primary objective's noise is reported


def measurements(o: TrialOutcome, key: str) -> list[float]:
    """The values of `key` (a metrics key, or `OBJECTIVE`) from every launch that measured `o`:
    the first measurement, then the confirmation's, in that order."""
    again = o.confirmation or {}
    runs = [r for r in again.get("runs") or [again] if r.get("valid", True) and not r.get("disturbed")] if again else []
    if key == OBJECTIVE:
        first, later = o.objective, [r.get("objective") for r in runs]
    else:
        first, later = (o.metrics or {}).get(key), [(r.get("metrics") or {}).get(key) for r in runs]
    values = [None if o.disturbed else first, *later]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _repeat_spread(o: TrialOutcome, key: str, objective_key: str | None) -> tuple[float, int] | None:
    if o.disturbed:
        return None
    runs = int((o.metrics or {}).get("repeats") or 0)
    metric = objective_key if key == OBJECTIVE else key
    cv = o.spread.get(metric) if metric else None
    return (float(cv), runs) if runs >= 2 and isinstance(cv, (int, float)) else None


def noise_of(outcomes: Sequence[TrialOutcome], key: str = OBJECTIVE, objective_key: str | None = None) -> Noise:
    """The study's pooled noise on `key`, over every config measured more than once.
    `objective_key` (the primary objective's metrics key) finds its ``--repeats`` spread."""
    own = [o for o in outcomes if o.duplicate_of is None and o.metrics]
    samples = {o.number: measurements(o, key) for o in own}
    spreads = {o.number: s for o in own if (s := _repeat_spread(o, key, objective_key)) is not None}
    return study_noise(samples, spreads)
