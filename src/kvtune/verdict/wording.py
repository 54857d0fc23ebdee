"""The reason sentence of each verdict, for people (code reads the Verdict's fields, never this)."""

from __future__ import annotations

from typing import Sequence

from kvtune.verdict.evidence import Goal
from kvtune.verdict.record import TargetCheck


def _trial(n: int) -> str:
    return f"trial {n}"


def _checks(checks: Sequence[TargetCheck], shown: str | None = None) -> str:
    picked = [c for c in checks if shown is None or c.shown == shown]
    return "; ".join(c.text() for c in picked)


def beats(chosen: int, goal: Goal) -> str:
    return f"{_trial(chosen)} beats the defaults on {goal.objective_name} on fresh servers, and meets every target"


def meets_where_defaults_miss(chosen: int, dflt: Sequence[TargetCheck]) -> str:
    """The targets only: each side's figures are the verdict's target lines."""
    missed = ", ".join(dict.fromkeys(c.target for c in dflt if c.shown == "missed"))
    return f"{_trial(chosen)} meets {missed} on fresh servers, where the defaults miss it"


def candidate_misses(chosen: int, cand: Sequence[TargetCheck]) -> str:
    return f"{_trial(chosen)} misses on fresh servers: {_checks(cand, 'missed')}"


def targets_unclear(chosen: int, cand: Sequence[TargetCheck]) -> str:
    unclear = _checks(cand, "unclear") or _checks(cand)
    return f"{_trial(chosen)} was not shown to meet the targets at 95% confidence ({unclear})"


def futile(chosen: int, pairs: int) -> str:
    return f"{_trial(chosen)} measured no better than the defaults after {pairs} pairs on fresh servers: stopped there"


def tied(chosen: int, margin: float, best_gain: float | None = None) -> str:
    """Tied: the largest gain the interval allows is below `margin`; when even that is a loss
    (`best_gain` < 0), the candidate is measurably worse, and the text says so, not "tied"."""
    if best_gain is not None and best_gain < 0:
        return (
            f"{_trial(chosen)} is worse than the defaults: its gain is at most {best_gain * 100:+.1f}% "
            f"at 95% confidence"
        )
    return f"{_trial(chosen)} and the defaults are tied: any gain is below {margin * 100:.0f}% at 95% confidence"


def unresolved(chosen: int, pairs: int) -> str:
    return f"{_trial(chosen)} was not shown better than the defaults in {pairs} pairs on fresh servers (the cap)"


def out_of_time(pairs: int) -> str:
    return f"the time budget ran out after {pairs} pair(s) on fresh servers"


def failed(chosen: int, why: str) -> str:
    return f"{_trial(chosen)} failed on a fresh server ({why})"


def defaults_failed(why: str) -> str:
    return f"the defaults could not be re-measured ({why}): nothing to compare with"


def all_failed_screening(shortlist: Sequence[int]) -> str:
    return f"every shortlisted config ({', '.join(map(str, shortlist))}) failed on a fresh server"


def busy(disturbed: int) -> str:
    return f"the machine's other load disturbed {disturbed} re-measurements: run again when it is quiet"


def defaults_only() -> str:
    return "no other config met the targets in the search"


def met_only_disturbed(trials: Sequence[int], defaults: bool) -> str:
    who = (["the defaults"] if defaults else []) + (
        [f"trial{'s' if len(trials) > 1 else ''} {', '.join(map(str, trials))}"] if trials else []
    )
    return (
        f"{' and '.join(who)} met the targets in the search only on measurements other load disturbed "
        "(no evidence either way): run again when the machine is quiet"
    )


def nothing_met() -> str:
    return "no config, the defaults included, met the targets in the search"
