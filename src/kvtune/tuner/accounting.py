"""What a study's budget has spent, read from the study itself, so a resumed study and every
worker count the same way.

`tuner/budget.py` decides (pure); this module reads the counts it needs from the stored trials
and keeps the two facts the trials do not hold in the study's user attrs:

- ``budget``: the trials, time budget and asks cap of the run that opened the study last (a
  worker on another host reads them there, not from the spec it was started with);
- ``budget_clock``: the wall time spent, kept across runs. Each run that opens the study starts a
  session (``started``); every finished trial moves ``last``, and so does every launch beside
  the trials (a sentinel or a fresh run of the confirmation, tuner/remeasure.py; an anchor run,
  tuner/anchor.py; the load search, tuner/load_search.py); the next run adds ``last - started``
  to ``before_s``. So
  ``--time-budget 2h`` means two hours of trials in all, however often the study is interrupted
  and resumed (the time of a trial that was interrupted is not counted: it is measured again).

A trial spends the budget when its config was launched (the baseline, launch failures and
crashes included); a pre-screen rejection or a duplicate is told to Optuna but spends nothing.
When the asks cap ends a study, `blame` names the knobs behind the pre-screen rejections: the
knobs whose removal (the server's own default) would have let a rejected config through.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import optuna

from kvtune.clock import REAL_CLOCK
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.launchers.base import Launcher
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.budget import Budget, StopReason, format_duration
from kvtune.workload import Workload

BUDGET_ATTR = "budget"
CLOCK_ATTR = "budget_clock"
NEVER_STARTED_ATTR = "never_started"  # launches beside the trials that never started (their seconds)
ENV_PREFIX = "env:"  # as tuner/space.py spells an environment knob
EXHAUSTED = "space exhausted"  # the sampler kept proposing measured configs (not a budget)

S = optuna.trial.TrialState


@dataclass(frozen=True)
class Spent:
    """The study's trials by what they cost. `asked` counts every ask told or running."""

    measured: int = 0  # launched configs: what --trials counts
    pre_screened: int = 0  # rejected before launch: free
    duplicates: int = 0  # a config measured before: free
    running: int = 0
    waiting: int = 0  # queued (baseline, informed or warm start, re-queued trials)

    @property
    def asked(self) -> int:
        return self.measured + self.pre_screened + self.duplicates + self.running


def kind_of(trial: optuna.trial.FrozenTrial) -> str:
    """ "measured", "pre-screen" or "duplicate" for a told trial (one without kvtune's outcome,
    e.g. told by hand, counts as measured: it may have cost anything)."""
    d = trial.user_attrs.get("outcome")
    if d is None:
        return "measured"
    if d.get("duplicate_of") is not None:
        return "duplicate"
    return "pre-screen" if d.get("failure") == FailureKind.PRE_SCREEN.value else "measured"


def spent(study: optuna.Study) -> Spent:
    trials = study.get_trials(deepcopy=False, states=(S.COMPLETE, S.RUNNING, S.WAITING))
    kinds = Counter(kind_of(t) for t in trials if t.state == S.COMPLETE)
    return Spent(
        measured=kinds["measured"],
        pre_screened=kinds["pre-screen"],
        duplicates=kinds["duplicate"],
        running=sum(1 for t in trials if t.state == S.RUNNING),
        waiting=sum(1 for t in trials if t.state == S.WAITING),
    )


# ---- the budget and the clock, stored in the study -----------------------------------------------
def store_budget(study: optuna.Study, budget: Budget) -> None:
    study.set_user_attr(
        BUDGET_ATTR, {"trials": budget.trials, "time_budget_s": budget.time_budget_s, "asks_cap": budget.asks_cap}
    )


def load_budget(study: optuna.Study, default: Budget) -> Budget:
    """The budget the run that opened the study last stored, else `default`."""
    d = study.user_attrs.get(BUDGET_ATTR)
    if not d:
        return default
    return Budget(int(d["trials"]), d.get("time_budget_s"), d.get("asks_cap"))


def begin_clock(study: optuna.Study, now: float | None = None) -> None:
    """Start this run's session: the time earlier runs spent (to their last trial) is kept."""
    now = REAL_CLOCK.wall() if now is None else now
    prev = study.user_attrs.get(CLOCK_ATTR)
    before = 0.0
    if prev:
        before = float(prev["before_s"]) + max(0.0, float(prev["last"]) - float(prev["started"]))
    study.set_user_attr(CLOCK_ATTR, {"started": now, "before_s": before, "last": now})


def clock_started(study: optuna.Study) -> bool:
    """Has a run started the study's clock? (Not yet for a study set up for a scheduler's
    workers: it starts when the first of them does, not while the job waits in the queue.)"""
    return bool(study.user_attrs.get(CLOCK_ATTR))


def tick_clock(study: optuna.Study, now: float | None = None) -> None:
    """A trial (or a sentinel, a confirmation run, an anchor run, the load search) finished: the
    session has spent at least until now."""
    now = REAL_CLOCK.wall() if now is None else now
    clock = study.user_attrs.get(CLOCK_ATTR)
    if clock:
        study.set_user_attr(CLOCK_ATTR, {**clock, "last": max(float(clock["last"]), now)})


def keep_never_started(study: optuna.Study, part: str, trial: int, failed: Iterable[Mapping[str, Any] | None]) -> None:
    """Keep the launches of a re-measurement or an anchor run that never started (each failed
    transiently, tuner/remeasure.py, tuner/anchor.py): they held the hardware through their
    start-up and waits, though nothing was measured, so the study's hardware time counts them in
    `part` (study/time_spent.py); a launch that later ran carries its failed ones instead."""
    kept = [{"part": part, "trial": trial, "time_spent": dict(t)} for t in failed if t]
    if kept:
        study.set_user_attr(NEVER_STARTED_ATTR, [*never_started(study), *kept])


def never_started(study: optuna.Study) -> list[dict[str, Any]]:
    """The launches `keep_never_started` kept (results.json "never_started")."""
    return list(study.user_attrs.get(NEVER_STARTED_ATTR) or [])


def elapsed_s(study: optuna.Study, now: float | None = None) -> float:
    """Wall time the study has spent on its budget: earlier runs plus this session so far."""
    now = REAL_CLOCK.wall() if now is None else now
    clock = study.user_attrs.get(CLOCK_ATTR)
    if not clock:
        return 0.0
    return float(clock["before_s"]) + max(0.0, now - float(clock["started"]))


# ---- why it stopped ------------------------------------------------------------------------------
def blame(outcomes: Iterable[TrialOutcome], launcher: Launcher, workload: Workload) -> list[tuple[str, int]]:
    """(knob, rejections it caused), most first: for each pre-screen rejection, the knobs whose
    removal alone (leaving the server's default) lets the config pass the pre-screen."""
    counts: Counter[str] = Counter()
    for o in outcomes:
        if o.failure is not FailureKind.PRE_SCREEN or o.duplicate_of is not None:
            continue
        c = o.candidate
        for name in c.flags:
            without = Candidate({k: v for k, v in c.flags.items() if k != name}, dict(c.env))
            if launcher.precheck(without, workload) is None:
                counts[name] += 1
        for name in c.env:
            without = Candidate(dict(c.flags), {k: v for k, v in c.env.items() if k != name})
            if launcher.precheck(without, workload) is None:
                counts[ENV_PREFIX + name] += 1
    return counts.most_common()


def stop_message(
    reason: StopReason | str,
    budget: Budget,
    used: Spent,
    elapsed: float,
    culprits: Sequence[tuple[str, int]] = (),
    reserve_s: float = 0.0,
) -> str:
    """One line for the summary: why the study stopped asking for trials (`reserve_s`: the time
    budget kept for the confirmation, tuner/budget.py)."""
    if reason == EXHAUSTED:
        return (
            f"the search space is exhausted (every config tried, or the sampler kept "
            f"proposing measured ones): measured {used.measured} of {budget.trials} trials"
        )
    reason = StopReason(reason)
    text = budget.explain(reason, used.measured, used.asked, elapsed, reserve_s)
    if reason is StopReason.ASKS:
        if culprits:
            top = ", ".join(f"{k} ({n} of {used.pre_screened})" for k, n in culprits[:2])
            text += f"; widen {top}: the pre-screen rejected configs for them"
        elif used.pre_screened:
            text += f"; the pre-screen rejected {used.pre_screened}: see their reasons with kvtune show"
    return text


def report(
    reason: StopReason | str | None,
    budget: Budget,
    used: Spent,
    elapsed: float,
    message: str = "",
    reserve_s: float = 0.0,
) -> dict[str, Any]:
    """results.json's "budget": what was spent, and why the study stopped asking."""
    return {
        "trials": budget.trials,
        "measured": used.measured,
        "pre_screened": used.pre_screened,
        "duplicates": used.duplicates,
        "asked": used.asked,
        "asks_cap": budget.cap,
        "time_budget_s": budget.time_budget_s,
        "elapsed_s": round(elapsed, 1),
        "elapsed": format_duration(elapsed),
        "confirmation_reserve_s": round(reserve_s, 1),  # the time budget kept for the confirmation
        "stopped": None if reason is None else str(reason),
        "message": message,
    }
