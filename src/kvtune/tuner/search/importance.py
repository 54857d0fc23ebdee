"""Which flags moved the objective: Optuna's parameter importance, computed by the tuner.

The tuner holds the study with each parameter's own distribution, so importance is computed here
and stored in results.json; the report only draws it (rebuilding a study from JSON guessed the
distributions). With few measurements importance is noise that looks like an answer, so below
`MIN_TRIALS` measured feasible trials it is not computed and the reason is stored instead.
Fitting it takes a while (a random forest over the trials), so while the study runs results.json
refits it at most every `REFIT_EVERY` newly measured trials (`ImportanceSchedule`), and once more
at the end, when the summary writes the final results.
"""

from __future__ import annotations

import warnings
from typing import Mapping, NamedTuple

import optuna

from kvtune.study.outcome import TrialOutcome

MIN_TRIALS = 8
REFIT_EVERY = 5  # newly measured trials between two fits while the study runs


class Importance(NamedTuple):
    values: dict[str, float] | None  # flag -> importance (sums to 1), None when skipped
    skipped: str = ""  # why it was not computed

    def to_dict(self) -> dict:
        """results.json's "importance": {flag: value}, or {"skipped": reason}."""
        return dict(self.values) if self.values is not None else {"skipped": self.skipped}


def param_importance(
    study: optuna.Study, min_trials: int = MIN_TRIALS, outcomes: Mapping[int, TrialOutcome] | None = None
) -> Importance:
    """Importance of each tuned flag for the (first) objective, over the trials measured in their
    own right (duplicates and launch failures carry no measurement of their parameters).
    `outcomes`: the trials' outcomes by number, already read (tuner/records.py); without
    them each trial's stored outcome is decoded here."""
    measured = _measured_trials(study, outcomes)
    feasible = sum(1 for _, o in measured if o.feasible)
    if feasible < min_trials:
        return Importance(
            None, f"needs at least {min_trials} measured feasible trials with tuned flags; this study has {feasible}"
        )
    varying = {k for t, _ in measured for k in t.params if len({repr(u.params.get(k)) for u, _ in measured}) > 1}
    if not varying:
        return Importance(None, "no flag took more than one value in the measured trials")
    if len({o.objective for _, o in measured}) < 2:
        return Importance(None, "every measured trial scored the same")
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        copy = optuna.create_study(direction=study.directions[0])
        copy.add_trials(
            [
                optuna.trial.create_trial(params=t.params, distributions=t.distributions, value=o.objective)
                for t, o in measured
            ]
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = optuna.importance.get_param_importances(copy)
    except (ValueError, RuntimeError) as e:
        return Importance(None, f"could not be computed: {e}")
    finally:
        optuna.logging.set_verbosity(verbosity)
    return Importance({k: float(v) for k, v in values.items()})


def _measured_trials(
    study: optuna.Study,
    outcomes: Mapping[int, TrialOutcome] | None,
) -> list[tuple[optuna.trial.FrozenTrial, TrialOutcome]]:
    measured = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if not t.params or "outcome" not in t.user_attrs:
            continue
        o = outcomes.get(t.number) if outcomes is not None else None
        o = o if o is not None else TrialOutcome.from_dict(t.user_attrs["outcome"])
        if o.measured and o.objective is not None:
            measured.append((t, o))
    return measured


class ImportanceSchedule:
    """The importance results.json shows while a study runs: fitted again only once `every` more
    trials were measured since the last fit, or when asked for the final figure. A skipped
    importance (too few trials, nothing varied) costs no fit and is always current."""

    def __init__(self, every: int = REFIT_EVERY, min_trials: int = MIN_TRIALS):
        self.every, self.min_trials = every, min_trials
        self._last: Importance | None = None
        self._fitted_at = 0  # measured trials at the last fit
        self.fits = 0

    def current(self, study: optuna.Study, outcomes: list[TrialOutcome], final: bool = False) -> Importance:
        measured = sum(1 for o in outcomes if o.measured and o.objective is not None)
        fresh = self._last is not None and self._last.values is not None and measured - self._fitted_at < self.every
        if fresh and not final:
            return self._last  # type: ignore[return-value]
        self._last = param_importance(study, self.min_trials, {o.number: o for o in outcomes})
        if self._last.values is not None:
            self._fitted_at, self.fits = measured, self.fits + 1
        return self._last
