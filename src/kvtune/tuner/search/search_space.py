"""SearchSpace: knobs -> Optuna suggestions -> a Candidate.

Define-by-run lets a knob depend on another (llama-server's V cache type is only tuned when
flash attention is on, its ubatch is only sampled up to the batch already drawn); fixed knobs are
recorded in the candidate but never suggested, so the sampler's space holds only what varies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.launchers.base import Launcher

# Environment-variable knobs are written as "env:NAME" in a study file's space.
ENV_PREFIX = "env:"


@dataclass
class SearchSpace:
    knobs: list[Knob]
    launcher: Launcher  # its `conditional(name, flags)` says which knobs depend on others

    def suggest(self, trial: optuna.trial.Trial) -> Candidate:
        flags: dict[str, Any] = {}
        env: dict[str, str] = {}
        for knob in self.knobs:
            tune, forced = self.launcher.conditional(knob.name, flags)
            if not tune:
                value = forced
            elif knob.kind == KnobKind.FIXED:
                value = knob.value
            elif knob.kind == KnobKind.CHOICES:
                value = _suggest_choice(trial, knob, self.launcher.offered_choices(knob, flags))
            elif knob.kind == KnobKind.INT:
                value = trial.suggest_int(
                    knob.name, int(knob.bounds[0]), int(knob.bounds[1]), step=knob.step or 1, log=knob.log
                )
            else:
                value = trial.suggest_float(knob.name, float(knob.bounds[0]), float(knob.bounds[1]), log=knob.log)
            if knob.name.startswith(ENV_PREFIX):
                env[knob.name[len(ENV_PREFIX) :]] = str(value)
            else:
                flags[knob.name] = value
        return Candidate(flags=flags, env=env)

    def describe(self) -> list[str]:
        return [k.describe() for k in self.knobs]

    def size(self) -> int | None:
        """How many distinct candidates the space holds at most (conditions only make it
        fewer), or None when a float range makes it endless."""
        total = 1
        for k in self.knobs:
            if k.kind == KnobKind.FLOAT:
                return None
            if k.kind == KnobKind.CHOICES:
                total *= len(set(k.choices))
            elif k.kind == KnobKind.INT:
                total *= (int(k.bounds[1]) - int(k.bounds[0])) // (k.step or 1) + 1
        return total


def _suggest_choice(trial: optuna.trial.Trial, knob: Knob, offered: tuple) -> Any:
    """Sample among the choices the launcher offers now. Optuna fixes a parameter's distribution
    per name, so a narrowed set is its own parameter, named by the set (``ubatch-size[64, 128,
    256]``): the full set keeps the knob's name, so most trials share one parameter with real
    values, and each distinct narrowed set is a conditional parameter TPE models apart. One
    choice left is taken without asking; none left (a study's own choices all invalid) offers
    them all and lets the pre-screen say why."""
    offered = tuple(c for c in knob.choices if c in offered)
    if not offered or offered == tuple(knob.choices):
        return trial.suggest_categorical(knob.name, list(knob.choices))
    if len(offered) == 1:
        return offered[0]
    return trial.suggest_categorical(f"{knob.name}{list(offered)}", list(offered))
