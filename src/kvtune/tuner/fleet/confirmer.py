"""Confirmation in every study: when the budget is spent, exactly one process confirms.

A study run by `kvtune run` on one machine confirms at its end (`Session.run`: the leaders
re-measured on fresh servers, one candidate tested against the defaults, tuner/confirmation.py). A
study set up with `kvtune run --setup-only` has no such process: its workers are placed by a
scheduler and leave when the budget is spent. So the last step of every worker of such a study
is `confirm_study`: the workers that get there hold an election through the storage
(tuner/fleet/claims.py), the winner waits for trials still running elsewhere, runs the very
confirmation a local study runs (`Tuner.confirm`) on its own servers (a worker of the study's
hardware class: it was let in), stores it in the study (the verdict in `VERDICT_ATTR`, and
`CONFIRMED_ATTR`, who confirmed and when, for several objectives too) and the others leave.
`kvtune confirm --storage URL --study NAME` takes part in the same election from any host, and
waits where a worker would leave.

A confirmer that dies mid-way leaves its runs in the study: the next worker to finish, or
`kvtune confirm`, finds its claim dead (claims.py), holds the election and resumes from those
runs (the verdict engine keeps no state: tuner/confirmation.py), so the verdict is stored once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import optuna
from optuna.storages import BaseStorage

from kvtune.clock import REAL_CLOCK, Clock
from kvtune.kinds import StrEnum
from kvtune.study.spec import StudySpec
from kvtune.tuner import accounting
from kvtune.tuner.budget import Budget
from kvtune.tuner.fleet import claims, recovery
from kvtune.tuner.fleet.setup import PLACEMENT_ATTR
from kvtune.tuner.fleet.shared import Shared
from kvtune.tuner.loop import Tuner
from kvtune.tuner.records import VERDICT_ATTR

CONFIRMED_ATTR = "confirmed"  # the study's user attr: who confirmed it, when (any number of objectives)
SETTLE_WAIT_S = 1.0  # between two looks at trials still running elsewhere


class Ending(StrEnum):
    """How `confirm_study` ended for this process."""

    CONFIRMED = "confirmed here"
    DONE = "confirmed already"  # by another process, before or while this one waited
    ELSEWHERE = "another process confirms"  # a worker leaves it to that one


@dataclass(frozen=True)
class Result:
    ending: Ending
    holder: claims.Holder | None = None  # ELSEWHERE: who confirms
    lost: bool = False  # CONFIRMED, but another process took the claim over meanwhile


def confirmed(study: optuna.Study) -> bool:
    """The study's confirmation ran to its end (a verdict, or several objectives confirmed)."""
    attrs = study.user_attrs
    return VERDICT_ATTR in attrs or CONFIRMED_ATTR in attrs


def confirmed_by(study: optuna.Study) -> str:
    """Who stored the study's confirmation, in words ("another process" for a study confirmed
    by a kvtune that did not record it)."""
    by = (study.user_attrs.get(CONFIRMED_ATTR) or {}).get("by") or {}
    if not by:
        return "another process"
    return f"slot {by.get('slot', '?')} on {by.get('host', '?')} (pid {by.get('pid', '?')})"


def pending(study: optuna.Study) -> bool:
    """A study set up for a scheduler's workers, whose spec asks for a confirmation that has
    not run (yet): `kvtune show`, `report` and `export` say so. Reads only."""
    attrs = study.user_attrs
    if PLACEMENT_ATTR not in attrs or "spec" not in attrs:
        return False
    return StudySpec.from_dict(attrs["spec"]).confirm_top > 0 and not confirmed(study)


def ends_with_confirmation(tuner: Tuner) -> bool:
    """Whether this worker's last step is `confirm_study`: a study set up for a scheduler (no
    creator waits to confirm it) whose spec asks for a confirmation."""
    coordinator = tuner.coordinator
    return isinstance(coordinator, Shared) and coordinator.stays and tuner.spec.confirm_top > 0


def confirm_study(
    tuner: Tuner,
    where: str | BaseStorage,
    *,
    wait: bool,
    on_wait: Callable[[str], None] = lambda line: None,
    clock: Clock = REAL_CLOCK,
    beat_s: float = claims.BEAT_S,
    grace_s: float = claims.GRACE_S,
    resume_clock: bool = False,
) -> Result:
    """Confirm `tuner`'s study here if this process wins the election (`where`: the study's
    storage URL or storage). `wait`: while another process confirms, wait for it (and take
    over if it dies) instead of leaving; `on_wait` hears one line each time the holder changes.
    `resume_clock`: this process comes after the search, as a resumed `kvtune run` does (`kvtune
    confirm`): the time budget's clock restarts from the last trial, so the time between is
    not spent from what is left for the confirmation."""
    if confirmed(tuner.study):
        return Result(Ending.DONE)
    side = claims.side_study(tuner.study.study_name, where)
    mine = claims.claim(side, tuner.worker)
    done = False
    try:
        with claims.Beating(mine, beat_s):
            election = claims.Election(side, str(tuner.worker.get("host")), clock, grace_s)
            other = _elect(tuner.study, election, mine.number, wait, on_wait, clock, beat_s)
            if other is not None:
                return other
            _settle(tuner, clock)
            if resume_clock:
                accounting.begin_clock(tuner.study, clock.wall())
            tuner.coordinator.summarizes = True  # this process summarizes now: the end-of-search sentinel is its own
            tuner.confirm()
            tuner.study.set_user_attr(CONFIRMED_ATTR, {"by": tuner.worker, "at": clock.wall(), "claim": mine.number})
            done = True
        return Result(Ending.CONFIRMED, lost=mine.lost)
    finally:
        mine.release(done)


def _elect(
    study: optuna.Study,
    election: claims.Election,
    mine: int,
    wait: bool,
    on_wait: Callable[[str], None],
    clock: Clock,
    beat_s: float,
) -> Result | None:
    """None when claim `mine` holds the confirmation; else how this process leaves: the study
    confirmed meanwhile, or (not `wait`) the live claim below that confirms it. A claim below
    whose holder is not known alive or dead yet is watched until it is."""
    told = None
    while True:
        if confirmed(study):
            return Result(Ending.DONE)
        holder, known = election.look(mine)
        if holder is None:
            return None
        if known and not wait:
            return Result(Ending.ELSEWHERE, holder)
        if known and told != holder.number:
            on_wait(f"{holder.describe()} confirms study {study.study_name}; waiting for its verdict")
            told = holder.number
        clock.sleep(max(0.1, beat_s / 2))


def _settle(tuner: Tuner, clock: Clock) -> None:
    """Wait for trials still running on other workers (their figures may change the leaders);
    one whose worker died is failed and re-queued by the recovery meanwhile."""
    study, host = tuner.study, str(tuner.worker.get("host"))
    while accounting.spent(study).running:
        clock.sleep(SETTLE_WAIT_S)
        recovery.recover(study, tuner.run_dir, host)


def still_searching(study: optuna.Study) -> str | None:
    """Why `kvtune confirm` must not start yet: trials are running or queued and the budget is
    not spent (its workers are still searching; the last of them confirms). None: the search is
    over, or every worker left before the budget was spent (then the trials there are confirmed)."""
    spec = StudySpec.from_dict(study.user_attrs["spec"])
    c = accounting.spent(study)
    if c.running + c.waiting == 0:
        return None
    budget = accounting.load_budget(study, Budget(spec.trials, spec.time_budget_s))
    if budget.stop_reason(c.measured, c.asked, accounting.elapsed_s(study)) is not None:
        return None
    return f"{c.running} trial(s) running, {c.waiting} queued, {c.measured} of {budget.trials} configs measured"
