"""How a study reports progress: three events the CLI's displays and the tests listen to.

Kept in a module of its own because the search loop, the trial runner and the confirmation all
emit them, and the CLI imports them without importing the loop's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvtune.knobs import Candidate
from kvtune.study.outcome import TrialOutcome


@dataclass
class Callbacks:
    """How the loop reports progress; the CLI prints, tests collect."""

    trial_started: Callable[[int, Candidate, bool], None] = lambda n, c, b: None
    phase: Callable[[int, str], None] = lambda n, p: None
    trial_finished: Callable[[TrialOutcome], None] = lambda o: None
