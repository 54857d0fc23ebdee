"""Which flags moved the objective: Optuna's parameter importance, computed by the tuner.

The tuner holds the study with each parameter's own distribution, so importance is computed here
and stored in results.json; the report only draws it (rebuilding a study from JSON guessed the
distributions). With few measurements importance is noise that looks like an answer, so below
`MIN_TRIALS` measured feasible trials it is not computed and the reason is stored instead.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import optuna

from kvtune.study.outcome import TrialOutcome

MIN_TRIALS = 8


class Importance(NamedTuple):
    values: dict[str, float] | None  # flag -> importance (sums to 1), None when skipped
    skipped: str = ""                # why it was not computed

    def to_dict(self) -> dict:
        """results.json's "importance": {flag: value}, or {"skipped": reason}."""
        return dict(self.values) if self.values is not None else {"skipped": self.skipped}


def param_importance(study: optuna.Study, min_trials: int = MIN_TRIALS) -> Importance:
    """Importance of each tuned flag for the (first) objective, over the trials measured in their
    own right (duplicates and launch failures carry no measurement of their parameters)."""
    measured: list[tuple[optuna.trial.FrozenTrial, TrialOutcome]] = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if t.params and "outcome" in t.user_attrs:
            o = TrialOutcome.from_dict(t.user_attrs["outcome"])
            if o.measured and o.objective is not None:
                measured.append((t, o))
    feasible = sum(1 for _, o in measured if o.feasible)
    if feasible < min_trials:
        return Importance(None, f"needs at least {min_trials} measured feasible trials with tuned "
                                f"flags; this study has {feasible}")
    varying = {k for t, _ in measured for k in t.params
               if len({repr(u.params.get(k)) for u, _ in measured}) > 1}
    if not varying:
        return Importance(None, "no flag took more than one value in the measured trials")
    if len({o.objective for _, o in measured}) < 2:
        return Importance(None, "every measured trial scored the same")
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        copy = optuna.create_study(direction=study.directions[0])
        copy.add_trials([optuna.trial.create_trial(params=t.params, distributions=t.distributions,
                                                   value=o.objective) for t, o in measured])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = optuna.importance.get_param_importances(copy)
    except (ValueError, RuntimeError) as e:
        return Importance(None, f"could not be computed: {e}")
    finally:
        optuna.logging.set_verbosity(verbosity)
    return Importance({k: float(v) for k, v in values.items()})
