"""From a study's record to the verdict's plain data, and back: one translation for every reader.

The confirmation (tuner/confirmation.py) asks `verdict.next_step` what to measure next with the
`Evidence` built here from the trial outcomes; the verdict it reaches is stored in the study and
attached to the trials it compared (`TrialOutcome.verdict`), so it travels inside results.json's
trials and a resumed study, `kvtune show` (local or `--storage`), the report and compare all
read the same decision (`stored_verdict`).

Which measurement plays which role (verdict/evidence.py):
- a trial's first measurement is SEARCH (it selects, never proves);
- a confirmation run with role "screen" is SCREEN; "proof" is PROOF;
- the baseline's end-of-search sentinel is its first PROOF run: measured after the search, on a
  fresh server, with the confirmation's prompts, right before the first candidate run, so it is
  the D that opens D W W D. Sentinels during the search are drift evidence only.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from kvtune.kinds import Direction, FailureKind
from kvtune.objectives.named_best import changed_from_defaults
from kvtune.objectives.targets import RATE_METRICS, Target
from kvtune.study.outcome import TrialOutcome
from kvtune.verdict import OBJECTIVE, Config, Evidence, Goal, Policy, Role, Run, TargetTest, Verdict

# a confirmation record holds the end-of-search sentinel only (tuner/sentinel.py): the first D
ROLE_OF_RUN = {"screen": Role.SCREEN, "proof": Role.PROOF, "sentinel": Role.PROOF}
RUN_ROLE = {Role.SCREEN: "screen", Role.PROOF: "proof"}


def goal_of(direction: Direction | str, targets: Sequence[Target], objective_name: str = "objective") -> Goal:
    """The study's objective and targets as the verdict tests them."""
    tests = tuple(
        TargetTest(
            text=t.text or t.constraint_key,
            key=t.key,
            upper=t.upper,
            threshold=None if t.relative else t.threshold,
            factor=t.factor,
            log_scale=t.metric not in RATE_METRICS and not t.fidelity,  # KL sits at 0: judged on the mean
        )
        for t in targets
    )
    return Goal(maximize=Direction(direction) is Direction.MAXIMIZE, targets=tests, objective_name=objective_name)


def policy_of(confirm_top: int, confirm_pairs: int) -> Policy:
    """`confirm_top` leaders screened (one fresh run each) before one is tested; at most
    `confirm_pairs` proof pairs (the cap), judged every 3 pairs and at the cap."""
    return Policy(cap=confirm_pairs, every=min(3, confirm_pairs), screen=max(confirm_top, 1))


def flags_changed(o: TrialOutcome, defaults: Mapping[str, Any] | None) -> int:
    """Flags and environment variables `o` changes from the server's own defaults."""
    return changed_from_defaults(o.candidate.flags, o.candidate.env, defaults)


def _values(metrics: Mapping[str, Any] | None, objective: float | None) -> dict[str, float]:
    out = {k: float(v) for k, v in (metrics or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if objective is not None:
        out[OBJECTIVE] = float(objective)
    return out


def _failed(feasible: bool, failure: str | None, reason: str, objective: Any) -> str:
    """Why a measurement failed outright ('' when it measured in full, maybe missing a target)."""
    if feasible:
        return ""
    if failure == FailureKind.TARGET_MISSED.value and isinstance(objective, (int, float)):
        return ""
    return reason or "no figure"


def search_run(o: TrialOutcome) -> Run:
    failure = o.failure.value if o.failure else None
    return Run(
        config=o.number,
        role=Role.SEARCH,
        values=_values(o.metrics, o.objective),
        met=o.feasible,
        failed=_failed(o.feasible, failure, o.reason, o.objective),
        disturbed=o.disturbed,
    )


def confirmation_run(number: int, run: Mapping[str, Any]) -> Run | None:
    """One stored re-measurement as the verdict's `Run` (None: not evidence for the verdict)."""
    role = ROLE_OF_RUN.get(str(run.get("role")))
    if role is None:
        return None
    feasible = bool(run.get("feasible"))
    return Run(
        config=number,
        role=role,
        values=_values(run.get("metrics"), run.get("objective")),
        met=feasible,
        failed=_failed(feasible, run.get("failure"), str(run.get("reason") or ""), run.get("objective")),
        disturbed=bool(run.get("disturbed")) or not run.get("valid", True),
    )


def evidence_of(outcomes: Sequence[TrialOutcome], defaults: Mapping[str, Any] | None = None) -> Evidence:
    """Every measured config (duplicates are the same config: left out) and its runs, the
    search's first, then each config's re-measurements in the order stored."""
    measured = [o for o in outcomes if o.duplicate_of is None and (o.metrics is not None or o.launched)]
    configs = tuple(Config(o.number, o.baseline, 0 if o.baseline else flags_changed(o, defaults)) for o in measured)
    runs: list[Run] = [search_run(o) for o in measured]
    timed: list[tuple[float, int, Run]] = []
    for o in measured:
        for i, stored in enumerate((o.confirmation or {}).get("runs") or []):
            run = confirmation_run(o.number, stored)
            if run is not None:
                timed.append((float(stored.get("at") or 0.0), i, run))
    runs.extend(r for _, _, r in sorted(timed, key=lambda x: (x[0], x[1])))
    return Evidence(configs, tuple(runs))


def stored_verdict(outcomes: Sequence[TrialOutcome]) -> Verdict | None:
    """The verdict a confirmation stored (None: none ran, or a study older than the verdict)."""
    for o in outcomes:
        raw = o.verdict
        if isinstance(raw, dict):
            try:
                return Verdict.from_dict(raw)
            except (KeyError, TypeError, ValueError):
                return None
    return None
