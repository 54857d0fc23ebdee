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

`fresh_failure` judges any re-measured config's fresh runs with the verdict's own target tests
(verdict/target_checks.py `fixed_checks`), so "still meets the targets on fresh servers" has one
meaning wherever it is shown.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from kvtune.kinds import Direction, FailureKind
from kvtune.objectives.targets import RATE_METRICS, Target
from kvtune.study.outcome import TrialOutcome
from kvtune.verdict import ALPHA, OBJECTIVE, Config, Evidence, Goal, Policy, Role, Run, TargetCheck, TargetTest, Verdict
from kvtune.verdict.target_checks import MISSED, fixed_checks, shown

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


def policy_of(confirm_top: int, confirm_pairs: int, confirm_rounds: int | None = None) -> Policy:
    """`confirm_top` leaders screened (one fresh run each, in up to `confirm_rounds` rounds; None:
    the verdict's default) before one is tested; at most `confirm_pairs` proof pairs (the cap),
    judged every 3 pairs and at the cap."""
    rounds = Policy().screen_rounds if confirm_rounds is None else confirm_rounds
    return Policy(cap=confirm_pairs, every=min(3, confirm_pairs), screen=max(confirm_top, 1), screen_rounds=rounds)


def flags_changed(o: TrialOutcome, defaults: Mapping[str, Any] | None) -> int:
    """Flags and environment variables `o` changes from the server's own defaults (a tie in the
    verdict goes to fewer)."""
    return changed_from_defaults(o.candidate.flags, o.candidate.env, defaults)


def changed_from_defaults(flags: Mapping[str, Any], env: Mapping[str, str], defaults: Mapping[str, Any] | None) -> int:
    """Flags and environment variables a config changes from the server's own defaults: the
    flags by `simplicity`, each environment variable unless `defaults` holds it (as
    ``env:NAME``) with the same value. `defaults` None: nothing is known, every given one counts."""
    env_defaults = {k[4:]: v for k, v in (defaults or {}).items() if k.startswith("env:")}
    return simplicity(flags, defaults) + simplicity(env, env_defaults if defaults is not None else None)


def simplicity(flags: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> int:
    """How many flags a config changes from the server's defaults (a baseline has 0). A flag set
    to None is not given. Without `defaults`, every given flag counts as a change; with them, a
    flag equal to its default (compared as given or as lower-case text, so ``512`` matches
    ``"512"``) does not."""
    changed = 0
    for name, value in flags.items():
        if value is None:
            continue
        if defaults is not None and name in defaults and _same(value, defaults[name]):
            continue
        changed += 1
    return changed


def _same(a: Any, b: Any) -> bool:
    return a == b or str(a).strip().lower() == str(b).strip().lower()


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
    return None if role is None else _run(number, run, role)


def _run(number: int, run: Mapping[str, Any], role: Role) -> Run:
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


def fresh_failure(
    runs: Sequence[Mapping[str, Any]],
    base_runs: Sequence[Mapping[str, Any]],
    goal: Goal,
    defaults: bool = False,
    alpha: float = ALPHA,
) -> tuple[str, tuple[TargetCheck, ...]]:
    """Why one config's fresh runs (stored re-measurements, the valid ones) fail, '' when they do
    not, with the verdict's target checks on them. A run that failed outright (a crash, failed
    requests, no figure) fails them; otherwise only a target the verdict's test shows missed
    (`fixed_checks` at one-sided `alpha`; relative targets against `base_runs`, the defaults'
    fresh runs; `defaults`: these are the defaults' own). A target not shown either way does not
    fail them, and is not said to be met either."""
    mine = [_run(0, r, Role.PROOF) for r in runs]
    outright = next((r for r in mine if r.failed), None)
    if outright is not None:
        return outright.failed, ()
    usable = [r for r in mine if r.usable]
    if not usable:
        return "no figure", ()
    base = [r for r in (_run(1, b, Role.PROOF) for b in base_runs) if r.usable]
    checks = fixed_checks(goal.targets, usable, base, alpha, defaults)
    if shown(checks) != MISSED:
        return "", checks
    missed = "; ".join(c.text() for c in checks if c.shown == MISSED)
    return f"shown to miss on {len(usable)} fresh run{'s' if len(usable) != 1 else ''}: {missed}", checks
