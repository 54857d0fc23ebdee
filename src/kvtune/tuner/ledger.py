"""What a study holds so far, read from its storage: the finished trials, the counts the budget
is charged with, whether a finite space is tried out, and results.json's study-level blocks.
The loop (tuner/loop.py) decides what to do next from these; this decides nothing. Split from
the Tuner so that the loop reads as a loop.
"""

from __future__ import annotations

from typing import Callable

import optuna

from kvtune.study.measured_noise import noise_of
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner import accounting, anchor, confirmation, load_search, sentinel
from kvtune.tuner.records import TrialRecords


class StudyLedger:
    """The study's bookkeeping: `study` in storage, its trial `records`, the size of the space
    asked over (`space_size`: None when infinite) and the key of the primary objective (for the
    noise in the report)."""

    def __init__(
        self,
        study: optuna.Study,
        records: TrialRecords,
        space_size: Callable[[], int | None],
        objective_key: str,
    ):
        self.study, self.records = study, records
        self.space_size, self.objective_key = space_size, objective_key

    def outcomes(self) -> list[TrialOutcome]:
        """Every finished trial (other workers' too), with its confirmation."""
        self.records.refresh()
        return self.records.outcomes()

    def counts(self) -> accounting.Spent:
        """Measured, pre-screened, duplicate, running and waiting trials (the budget's charge)."""
        return accounting.spent(self.study)

    def completed(self) -> int:
        """Configs measured so far: what --trials counts (pre-screen rejections and duplicates
        are free)."""
        return self.counts().measured

    def tried_all(self) -> bool:
        """Every candidate of a finite space has a finished trial of its own (measured or
        rejected before launch): asking more could only give duplicates. A trial that failed
        transiently does not count: its config is to be measured again."""
        size = self.space_size()
        if size is None:
            return False
        done = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))

        def settled(t: optuna.trial.FrozenTrial) -> bool:
            outcome = t.user_attrs.get("outcome") or {}
            return outcome.get("duplicate_of") is None and not outcome.get("transient")

        tried = [t for t in done if not t.user_attrs.get("baseline") and settled(t)]
        return len(tried) >= size

    def report(self, sentinel_every: int) -> dict:
        """results.json's "sentinel" (the baseline series and its drift), "verdict" (the
        confirmation's decision, verdict/record.py), "anchor" (the quiet re-measurements of a
        disturbed baseline that relative targets were anchored on, tuner/anchor.py),
        "load_search" (the load at which the targets hold, tuner/load_search.py) and
        "never_started" (launches beside the trials that never started) blocks, read
        from the study, so a resumed study and a study read from its storage (tuner/fleet/
        watch.py) show them too; study/results.py `add_study_blocks` puts them in the payload."""
        outcomes = self.outcomes()
        noise = noise_of(outcomes, objective_key=self.objective_key)
        baseline = next((o for o in outcomes if o.baseline), None)
        out: dict = {}
        block = sentinel.report(self.study, baseline, noise, sentinel_every)
        if block is not None:
            out["sentinel"] = block
        verdict = self.study.user_attrs.get(confirmation.VERDICT_ATTR)
        if verdict is not None:
            out["verdict"] = verdict
        anchored = anchor.stored(self.study)
        if anchored:  # the trials carry their judgement again; this says what it was made against
            out["anchor"] = {k: anchored[k] for k in ("runs", "quiet", "gave_up") if k in anchored}
        load = self.study.user_attrs.get(load_search.LOAD_ATTR)
        if load:
            out["load_search"] = load
        lost = accounting.never_started(self.study)
        if lost:  # their seconds are the study's hardware time (study/time_spent.py)
            out["never_started"] = lost
        return out
