"""Scoring a measured trial against the study's targets and objectives. Pure.

Every trial ends with one constraint per target (keyed by the whole target text, so two targets
on one metric stay two constraints) plus `server_ran`; <= 0 means met. An infeasible trial
carries a `FailureKind` for code and a reason for people. Relative targets ("ttft<0.8x") are
set from the baseline's first measurement; the baseline, measured first, is judged against its
own figures.
"""

from __future__ import annotations

import math
from typing import Sequence

from kvtune.errors import TargetError
from kvtune.kinds import FailureKind
from kvtune.objectives.metrics import truncation_note
from kvtune.objectives.objective import Objective
from kvtune.objectives.targets import MAX_MARGIN, Target
from kvtune.study.outcome import RUNS_KEY, TrialOutcome

NO_BASELINE = "relative targets need the baseline's measurement, and the baseline has none"


def resolved_targets(
    targets: Sequence[Target], baseline: TrialOutcome | None, outcome: TrialOutcome
) -> list[Target] | None:
    """The targets with relative ones set from `baseline`'s metrics (or `outcome`'s own, when it
    is the baseline measured first); None when a relative target has nothing to refer to."""
    if not any(t.relative for t in targets):
        return list(targets)
    reference = baseline.metrics if baseline is not None else (outcome.metrics if outcome.baseline else None)
    try:
        return [t.resolve(reference or {}) for t in targets]
    except TargetError:
        return None


def judge(
    outcome: TrialOutcome, resolved: Sequence[Target] | None, targets: Sequence[Target], objectives: Sequence[Objective]
) -> None:
    """Judge a measured outcome against the targets: fill in constraints, objective values and,
    when a target broke, the failure and reason. This is one run's own judgement (what the search
    is told); whether a re-measured config meets the targets is the verdict's tests on its fresh
    runs (study/verdict_evidence.py `fresh_failure`)."""
    m = outcome.metrics or {}
    if resolved is None:
        infeasible(outcome, targets, FailureKind.TARGET_MISSED, NO_BASELINE, keep_metrics=True)
        return
    outcome.constraints = {t.constraint_key: t.margin(m) for t in resolved}
    outcome.constraints[RUNS_KEY] = -1.0
    values = [m.get(o.key) for o in objectives]
    values = [None if v is None or not math.isfinite(v) else float(v) for v in values]
    outcome.objective = values[0]
    outcome.objectives = values
    broken = [t for t in resolved if not t.met(m)]
    if broken:
        all_failed = bool(m.get("num_requests")) and m.get("failed") == m.get("num_requests")
        requests = all_failed or any(t.metric == "error_rate" for t in broken)
        outcome.failure = FailureKind.REQUESTS_FAILED if requests else FailureKind.TARGET_MISSED
        outcome.reason = "; ".join(describe_miss(t, m) for t in broken)


def infeasible(
    outcome: TrialOutcome, targets: Sequence[Target], kind: FailureKind, reason: str, keep_metrics: bool = False
) -> TrialOutcome:
    """Mark the trial infeasible for `kind`: every constraint violated, the reason kept for
    people (with `keep_metrics`, what was measured before it failed stays)."""
    if not keep_metrics:
        outcome.metrics = None
        outcome.objective = None
    outcome.constraints = {t.constraint_key: MAX_MARGIN for t in targets}
    outcome.constraints[RUNS_KEY] = 1.0
    outcome.failure = kind
    outcome.reason = reason
    return outcome


def describe_miss(t: Target, metrics: dict[str, float]) -> str:
    """``ttft_p95 11800 ms breaks ttft<10s`` (an error rate says how many answers were cut short)."""
    v = t.value(metrics)
    if t.fidelity and math.isinf(v):
        return f"{t.name} not measured (the fidelity probe failed or had no reference) breaks {t.text or t.describe()}"
    if math.isinf(v):
        shown = "inf (requests failed)"
    elif t.metric == "error_rate":
        shown = f"{v * 100:.1f}%" + truncation_note(metrics)
    elif t.fidelity:
        shown = f"{v:.4f} (95% upper bound)"
    elif t.key.endswith("_ms"):
        shown = f"{v:.0f} ms"
    else:
        shown = f"{v:.1f}"
    return f"{t.name} {shown} breaks {t.text or t.describe()}"
