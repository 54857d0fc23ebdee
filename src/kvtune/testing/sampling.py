"""Draw many candidates from a search space, as a study would: for tests of what a space (with
a launcher's conditional knobs and offered choices) can and cannot propose."""

from __future__ import annotations

import optuna

from kvtune.knobs import Candidate, Knob
from kvtune.launchers.base import Launcher
from kvtune.tuner.search.search_space import SearchSpace


def suggest_many(knobs: list[Knob], launcher: Launcher, n: int = 60, seed: int = 1) -> list[Candidate]:
    """`n` candidates drawn by a seeded random sampler (each trial told 0.0)."""
    space = SearchSpace(knobs, launcher)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        t = study.ask()
        out.append(space.suggest(t))
        study.tell(t, 0.0)
    return out
