"""The study's finished trials as `TrialOutcome`s, decoded once and appended to as trials finish.

Every lookup of a trial (is this config measured already? where is the baseline? what goes into
results.json?) used to rebuild every stored trial with `TrialOutcome.from_dict`, several times per
trial. The store decodes a stored trial once, by its number: `add` records the trial this worker
just told, `refresh` reads from storage only the finished trials it does not hold yet (those other
workers told, or a resumed study's). A finished trial never changes; the confirmations, kept in
the study's user attrs, are re-read on refresh and attached to their trials, and so is the
verdict (to the trials it names, tested and compared with). So is the search's judgement of a
trial made again against a quiet anchor (tuner/anchor.py): a relative target is judged against
the measurement `anchor()` gives, never against a disturbed baseline for good.
"""

from __future__ import annotations

from typing import Any

import optuna

from kvtune.jsonsafe import to_jsonable
from kvtune.knobs import Candidate
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner import anchor as anchoring

CONFIRMATIONS_ATTR = "confirmations"
VERDICT_ATTR = "verdict"  # the study's user attr holding the confirmation's verdict


class TrialRecords:
    """The outcomes of `study`'s COMPLETE trials that carry kvtune's outcome."""

    def __init__(self, study: optuna.Study):
        self.study = study
        self._by_number: dict[int, TrialOutcome] = {}
        self.confirmations: dict[str, Any] = {}
        self.verdict: dict[str, Any] | None = None
        self.anchor_state: dict[str, Any] = {}
        self.refresh()

    def refresh(self) -> None:
        """Decode the finished trials not held yet; re-read the confirmations."""
        for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if t.number not in self._by_number and "outcome" in t.user_attrs:
                self._by_number[t.number] = TrialOutcome.from_dict(t.user_attrs["outcome"])
        self.confirmations = dict(self.study.user_attrs.get(CONFIRMATIONS_ATTR, {}))
        self.verdict = self.study.user_attrs.get(VERDICT_ATTR)
        self.anchor_state = anchoring.stored(self.study)
        self._attach()

    def add(self, stored: dict[str, Any]) -> TrialOutcome:
        """A trial this worker just told, as stored (`to_jsonable(outcome)`): read back the way a
        refresh would read it, so both give the same record."""
        outcome = TrialOutcome.from_dict(stored)
        outcome.confirmation = self.confirmations.get(str(outcome.number))
        outcome.verdict = self._verdict_for(outcome.number)
        anchoring.apply([outcome], self.anchor_state)
        self._by_number[outcome.number] = outcome
        return outcome

    def decide(self, verdict: dict[str, Any]) -> None:
        """Store the study's verdict (a resumed confirmation does not decide again)."""
        self.verdict = to_jsonable(verdict)
        self.study.set_user_attr(VERDICT_ATTR, self.verdict)
        self._attach()

    def confirm(self, number: int, record: dict[str, Any]) -> None:
        """Store the confirmation of trial `number` (in the study: a resumed confirmation skips it)."""
        self.confirmations[str(number)] = record
        self.study.set_user_attr(CONFIRMATIONS_ATTR, to_jsonable(self.confirmations))
        self._attach()

    def outcomes(self) -> list[TrialOutcome]:
        """Every finished trial held, by number."""
        return [self._by_number[n] for n in sorted(self._by_number)]

    def measured_baseline(self) -> TrialOutcome | None:
        """The baseline's measurement (what relative targets and the early stop refer to)."""
        return next((o for o in self.outcomes() if o.baseline and o.measured), None)

    def anchor(self) -> TrialOutcome | None:
        """What relative targets are judged against now (tuner/anchor.py `anchored_on`): the
        baseline's measurement, or its quiet re-measurement when the first was disturbed."""
        return anchoring.anchored_on(self.measured_baseline(), self.anchor_state)

    def find_measured(self, candidate: Candidate) -> TrialOutcome | None:
        """An earlier trial that measured `candidate` in its own right (not the baseline, not a
        copy, not a transient failure: a port clash or slow start is no verdict to copy)."""
        for o in self.outcomes():
            if o.duplicate_of is None and o.candidate == candidate and not o.baseline and not o.transient:
                return o
        return None

    def _verdict_for(self, number: int) -> dict[str, Any] | None:
        v = self.verdict
        if not isinstance(v, dict):
            return None
        return v if number in (v.get("named"), v.get("candidate"), v.get("baseline")) else None

    def _attach(self) -> None:
        for n, o in self._by_number.items():
            o.confirmation = self.confirmations.get(str(n))
            o.verdict = self._verdict_for(n)
        anchoring.apply(list(self._by_number.values()), self.anchor_state)
