"""An honest budget: what ``--trials`` and ``--time-budget`` buy, and when to stop asking.

Users pay for hardware time, so the budget counts what costs it. ``--trials N`` is the number of
configs that were launched and measured (the baseline included; a launch or benchmark failure
cost its time and counts too). Pre-screen rejections and duplicates are still told to Optuna, so
the sampler learns from them, but they spend nothing and do not count. Since they cost nothing, a
space whose corners are almost all impossible could be asked forever: a cap on asks,
``max(50, 10 x trials)`` every ask whatever became of it, ends such a study (the caller names the
knobs to widen). ``--time-budget 2h`` is the whole run's wall time, the confirmation included:
a user who gives a box two hours expects a verified answer within them, not a search that spends
them all and leaves the verdict no time (it would then keep the defaults for want of evidence).
So the search stops asking new trials once what is left would no longer hold the verdict's first
look (`confirmation_reserve_s`: its launches at the search's mean hardware-seconds per launch);
a trial already running finishes, and the confirmation gets the rest. On one worker the wall time
is the hardware time the summary's time lines count (study/time_spent.py: the search, the
sentinels, the anchor's fresh measurements of the defaults, the confirmation and the load
search, each inside the run's wall time) plus kvtune's own work between launches; workers that
share a study share its one clock. Both budgets may be given, the first one spent wins. Pure:
the caller passes the counts, the elapsed time and the reserve; no clock here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvtune.durations import format_duration, parse_duration  # noqa: F401  (re-exported)
from kvtune.errors import SpecError
from kvtune.kinds import StrEnum
from kvtune.study.verdict_evidence import policy_of

MIN_ASKS_CAP = 50
ASKS_PER_TRIAL = 10


class StopReason(StrEnum):
    """Why the study stops asking for trials. `text` on `Budget.explain` is for people."""

    TRIALS = "trials"  # --trials configs measured (or launched and still running)
    TIME = "time budget"  # --time-budget of wall time spent
    ASKS = "asks cap"  # the asks cap reached: the space is almost all impossible


@dataclass(frozen=True)
class Budget:
    """The study's budget. `asks_cap` None means ``max(50, 10 x trials)``."""

    trials: int
    time_budget_s: float | None = None
    asks_cap: int | None = None

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise SpecError(f"--trials {self.trials}: measure at least 1 config (the baseline)")
        if self.time_budget_s is not None and not (math.isfinite(self.time_budget_s) and self.time_budget_s > 0):
            raise SpecError(f"--time-budget {self.time_budget_s!r}: must be a positive duration")
        if self.asks_cap is not None and self.asks_cap < self.trials:
            raise SpecError(
                f"asks cap {self.asks_cap} is below --trials {self.trials}: every measured trial is one ask"
            )

    @property
    def cap(self) -> int:
        """How many asks (measured, pre-screened or duplicate) the study may make in all."""
        if self.asks_cap is not None:
            return self.asks_cap
        return max(MIN_ASKS_CAP, ASKS_PER_TRIAL * self.trials)

    def remaining_trials(self, measured: int, in_flight: int = 0) -> int:
        """Configs still to launch: trials minus those measured and those running now."""
        return max(0, self.trials - measured - in_flight)

    def stop_reason(
        self, measured: int, asked: int, elapsed_s: float, in_flight: int = 0, reserve_s: float = 0.0
    ) -> StopReason | None:
        """Why no further trial should be asked, or None to ask another.

        `measured`: configs launched and finished (baseline included; not pre-screen rejections
        or duplicates); `in_flight`: launched and still running (other workers); `asked`: every
        ask so far, whatever became of it; `elapsed_s`: wall time since the study (re)started
        spending this budget; `reserve_s`: the time budget kept for the confirmation. The trials
        budget is checked first: a study that got all its measurements ended normally, whatever
        else ran out at the same moment.
        """
        if self.remaining_trials(measured, in_flight) == 0:
            return StopReason.TRIALS
        if self.time_budget_s is not None and elapsed_s + reserve_s >= self.time_budget_s:
            return StopReason.TIME
        if asked >= self.cap:
            return StopReason.ASKS
        return None

    def explain(self, reason: StopReason, measured: int, asked: int, elapsed_s: float, reserve_s: float = 0.0) -> str:
        """One line for the summary. For `ASKS` the caller appends the knobs to widen."""
        if reason is StopReason.TRIALS:
            return f"measured {measured} of {self.trials} trials"
        if reason is StopReason.TIME:
            of = f"time budget of {format_duration(self.time_budget_s or 0.0)}"
            spent = (
                f"{of}: the search stopped after {format_duration(elapsed_s)}, keeping about "
                f"{format_duration(reserve_s)} for the confirmation"
                if reserve_s > 0 and elapsed_s < (self.time_budget_s or 0.0)
                else f"{of} spent after {format_duration(elapsed_s)}"
            )
            return f"{spent}: measured {measured} of {self.trials} trials"
        cap_rule = "" if self.asks_cap is not None else f" (the cap is max({MIN_ASKS_CAP}, {ASKS_PER_TRIAL} x trials))"
        return (
            f"asked {asked} configs{cap_rule} but only {measured} of {self.trials} could be "
            f"measured: the rest were rejected before launch or repeated a config; the space "
            f"is almost all impossible"
        )


def first_look_launches(confirm_top: int, confirm_pairs: int) -> int:
    """Launches the verdict needs before its first look: one fresh run per screened leader (when
    it screens several) and `every` pairs of the chosen one against the defaults; 0 without a
    confirmation (`confirm_top` 0)."""
    if confirm_top <= 0:
        return 0
    policy = policy_of(confirm_top, confirm_pairs)
    return (policy.screen if policy.screen > 1 else 0) + 2 * policy.every


def confirmation_reserve_s(search_s: float, search_launches: int, launches: int) -> float:
    """The time budget to keep for the confirmation: `launches` at the search's mean
    hardware-seconds per launch (`search_s` over `search_launches`); 0 before a launch was timed."""
    if search_launches <= 0 or launches <= 0:
        return 0.0
    return launches * search_s / search_launches
