"""SearchSpace: knobs -> Optuna suggestions -> a Candidate.

Define-by-run lets a knob depend on another (llama-server's V cache type is only tuned when
flash attention is on); fixed knobs are recorded in the candidate but never suggested, so the
sampler's space holds only what varies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

from kvtune.kinds import KnobKind
from kvtune.launchers.base import Candidate, Knob, Launcher

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
                value = trial.suggest_categorical(knob.name, list(knob.choices))
            elif knob.kind == KnobKind.INT:
                value = trial.suggest_int(knob.name, int(knob.low), int(knob.high),
                                          step=knob.step or 1, log=knob.log)
            else:
                value = trial.suggest_float(knob.name, float(knob.low), float(knob.high), log=knob.log)
            if knob.name.startswith(ENV_PREFIX):
                env[knob.name[len(ENV_PREFIX):]] = str(value)
            else:
                flags[knob.name] = value
        return Candidate(flags=flags, env=env)

    def describe(self) -> list[str]:
        return [k.describe() for k in self.knobs]
