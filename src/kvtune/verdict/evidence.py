"""What the verdict is decided from: the goal, the policy, and every measurement (plain data).

The tuner turns its trial records into these types (study/verdict_evidence.py) and the
simulator of benchmarks/verdicts.py builds them directly, so the one decision procedure
(verdict/engine.py) serves a real study and thousands of simulated ones alike. Nothing here
does I/O or reads a clock.

Roles keep selection and proof apart: search and screening measurements choose which config is
put to the test (they are biased up for the config they chose: the winner's curse); only proof
runs, fresh servers measured after the choice, enter the test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

OBJECTIVE = "objective"  # the key of a run's objective value in `Run.values`
# The test's level. 0.04, not 0.05: the gain's trimmed test holds it with one unbounded outlier
# on either arm (verdict/boundaries.py), so that world's false-win rate is the level itself, and
# the contract (at most 5%, the upper end of a 2,000-study interval at most 6%) needs room for
# the Monte Carlo's spread and for drift: those cells measure 3.7-4.2% at 0.04 (3,000 studies).
ALPHA = 0.04


class Role(str, Enum):
    SEARCH = "search"  # the search's one measurement of a config: selects
    SCREEN = "screen"  # one fresh run of each shortlisted leader: selects among them
    PROOF = "proof"  # fresh runs of the chosen candidate and the defaults, D W W D: prove


@dataclass(frozen=True)
class TargetTest:
    """One target as the verdict tests it. `key`: the metrics key; `upper`: the figure must stay
    below the bound (``<``), else above it; `threshold` (absolute, the metric's unit) or
    `factor` (relative to the defaults' figure); `log_scale`: latencies and throughputs are
    tested with t on logs, rates (error rate, SLO attainment) on the mean of the runs."""

    text: str
    key: str
    upper: bool
    threshold: float | None = None
    factor: float | None = None
    log_scale: bool = True

    def __post_init__(self) -> None:
        if (self.threshold is None) == (self.factor is None):
            raise ValueError(f"target {self.text!r}: give exactly one of threshold and factor")


@dataclass(frozen=True)
class Goal:
    """What the study optimises: its objective (maximised or not) under its targets."""

    maximize: bool
    targets: tuple[TargetTest, ...] = ()
    objective_name: str = "objective"


@dataclass(frozen=True)
class Policy:
    """The confirmation's design. `alpha`: the chance of a false "beats the defaults" (or a
    false "meets the target") it allows; `cap`: proof runs per arm at most; `every`: pairs
    between two looks; `screen`: leaders given one fresh run each before one is chosen (1: the
    search's leader is tested directly); `screen_rounds`: the most rounds of such runs, the
    leaders clearly behind set aside after each (verdict/selection.py); `max_disturbed`: runs
    the machine's other load may spoil before the verdict gives up; `margin`: a gain whose whole interval lies below it is a
    tie (not worth a changed flag); `headroom`: configs whose search run met every target with
    this fraction to spare are put to the test before those that met one narrowly."""

    alpha: float = ALPHA
    cap: int = 9
    every: int = 3
    screen: int = 3
    screen_rounds: int = 3
    max_disturbed: int = 4
    margin: float = 0.05
    headroom: float = 0.15

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}")
        for name in ("cap", "every", "screen", "screen_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.cap < 2:
            raise ValueError(f"cap must be at least 2 pairs (one pair gives no noise estimate), got {self.cap}")


@dataclass(frozen=True)
class Config:
    """A measured config: its trial number, whether it is the server's defaults, how many flags
    it changes from them (ties go to fewer)."""

    number: int
    baseline: bool = False
    flags_changed: int = 0


@dataclass(frozen=True)
class Run:
    """One measurement. `values`: its metrics, the objective under `OBJECTIVE`; `met`: it met
    every target by its own figures (the runner's judgement; relative targets against the
    defaults as measured then); `failed`: why it failed outright (a crash, failed requests, no
    figure), '' when it measured in full; `disturbed`: other load on the machine spoiled it."""

    config: int
    role: Role
    values: Mapping[str, float] = field(default_factory=dict)
    met: bool = True
    failed: str = ""
    disturbed: bool = False

    @property
    def objective(self) -> float | None:
        v = self.values.get(OBJECTIVE)
        return v if isinstance(v, (int, float)) and v == v and 0 < v < float("inf") else None

    @property
    def usable(self) -> bool:
        """Evidence: measured in full, undisturbed, with a positive objective."""
        return not self.failed and not self.disturbed and self.objective is not None


@dataclass(frozen=True)
class Evidence:
    """Every config and every run so far, in the order measured."""

    configs: tuple[Config, ...]
    runs: tuple[Run, ...]

    def config(self, number: int) -> Config:
        return next(c for c in self.configs if c.number == number)

    @property
    def baseline(self) -> Config | None:
        return next((c for c in self.configs if c.baseline), None)

    def of(self, number: int, role: Role) -> list[Run]:
        return [r for r in self.runs if r.config == number and r.role is role]

    def with_run(self, run: Run) -> "Evidence":
        return Evidence(self.configs, (*self.runs, run))
