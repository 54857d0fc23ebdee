"""Simulated studies through the real verdict code: the error rates kvtune states come from here.

A simulated study has a landscape (each config's true objective relative to the defaults, and
optionally its true TPOT), multiplicative lognormal run-to-run noise (`cv`), a slow drift over
the study (the machine getting faster or slower by `drift` from its first run to its last), and
optionally one undetected outlier, not flagged as disturbed: one of the defaults' first four
measurements (search, the end-of-search sentinel, the first proof runs) or one of the candidate's
first four proof runs (`outlier_side`) at `outlier` times its figure. The search measures every
config once (the defaults first), the tuner's end-of-search sentinel measures the defaults once more, then `verdict.next_step` is asked what to measure
until it is done, exactly as tuner/confirmation.py asks it. No servers, no clock: virtual runs.

Used by benchmarks/verdicts.py (the published table, docs/verdicts.md) and by the unit test that
holds the false-win bound (tests/unit/verdict/test_error_rates.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from kvtune.verdict import OBJECTIVE, Config, Done, Evidence, Goal, Policy, Role, Run, TargetTest, Verdict, next_step

TPOT = "p95_tpot_ms"
DEFAULT_POLICY = Policy()
THROUGHPUT = Goal(maximize=True)
MAX_STEPS = 200


@dataclass(frozen=True)
class Landscape:
    """True figures per config, relative to the defaults (index 0): `objective` (higher is
    better) and `tpot` (lower is better; None: the study has no TPOT target)."""

    objective: tuple[float, ...]
    tpot: tuple[float, ...] | None = None

    @property
    def size(self) -> int:
        return len(self.objective)


def null(trials: int) -> Landscape:
    """Nothing beats the defaults: every config as good as them."""
    return Landscape(tuple([1.0] * trials))


def needle(trials: int, effect: float) -> Landscape:
    """One config `effect` better than the defaults (e.g. 0.2: +20%), every other one equal."""
    return Landscape((1.0, 1.0 + effect, *([1.0] * (trials - 2))))


def spread(trials: int, effect: float, rng: np.random.Generator) -> Landscape:
    """One config `effect` better, the others spread between 40% worse and as good as the
    defaults (a tuning space where most changes cost something)."""
    others = rng.uniform(0.6, 1.0, trials - 2)
    return Landscape((1.0, 1.0 + effect, *others.tolist()))


def several(trials: int, rng: np.random.Generator, best: float = 0.2, others: int = 5) -> Landscape:
    """Several configs better than the defaults: one `best` (+20%), `others` between +5% and +15%
    (fewer when the trials leave no room), the rest as good as the defaults."""
    k = max(0, min(others, trials - 2))
    better = rng.uniform(1.05, 1.15, k)
    return Landscape((1.0, 1.0 + best, *better.tolist(), *([1.0] * (trials - 2 - k))))


def latency(trials: int, tpot_ratio: float, throughput_cost: float = 0.2) -> Landscape:
    """A latency-target study: every config but the defaults has TPOT `tpot_ratio` of the
    defaults' and `throughput_cost` less throughput (fewer slots: shorter TPOT, fewer tokens/s)."""
    return Landscape((1.0, *([1.0 - throughput_cost] * (trials - 1))), (1.0, *([tpot_ratio] * (trials - 1))))


@dataclass
class World:
    """One simulated machine: it turns "measure config c" into a run with noise and drift."""

    landscape: Landscape
    cv: float
    drift: float
    expected_runs: int
    rng: np.random.Generator
    outlier: float | None = None
    outlier_at: int = 0  # which of that side's measurements (defaults: 0 is its search run)
    outlier_side: str = "defaults"  # or "candidate": the tested config's proof runs
    runs_done: int = 0
    defaults_done: int = 0
    candidate_proofs: int = 0
    goal: Goal = field(default_factory=lambda: Goal(maximize=True))

    def run(self, config: int, role: Role, baseline_search: Run | None = None) -> Run:
        tau = min(self.runs_done / max(self.expected_runs - 1, 1), 1.0)
        trend = math.exp(math.log1p(self.drift) * tau)
        sd = math.sqrt(math.log1p(self.cv**2))
        factor = trend * math.exp(self.rng.normal(0.0, sd))
        if config == 0:
            if self.outlier is not None and self.outlier_side == "defaults" and self.defaults_done == self.outlier_at:
                factor *= self.outlier
            self.defaults_done += 1
        elif role is Role.PROOF:
            if (
                self.outlier is not None
                and self.outlier_side == "candidate"
                and self.candidate_proofs == self.outlier_at
            ):
                factor *= self.outlier
            self.candidate_proofs += 1
        self.runs_done += 1
        values = {OBJECTIVE: self.landscape.objective[config] * 100.0 * factor}
        if self.landscape.tpot is not None:
            values[TPOT] = self.landscape.tpot[config] * 40.0 * math.exp(self.rng.normal(0.0, sd)) / trend
        return Run(config, role, values, met=self._met(values, baseline_search))

    def _met(self, values: dict[str, float], baseline: Run | None) -> bool:
        """The runner's point judgement of the targets (relative ones against the defaults' search run)."""
        for t in self.goal.targets:
            ref = t.threshold if t.factor is None else (t.factor * baseline.values[t.key] if baseline else None)
            if ref is None:
                continue
            if (values[t.key] >= ref) if t.upper else (values[t.key] <= ref):
                return False
        return True


def latency_goal(factor: float = 0.7) -> Goal:
    return Goal(maximize=True, targets=(TargetTest(f"tpot_p95<{factor}x", TPOT, upper=True, factor=factor),))


def simulate(
    landscape: Landscape,
    cv: float,
    rng: np.random.Generator,
    policy: Policy = DEFAULT_POLICY,
    drift: float = 0.0,
    outlier: float | None = None,
    goal: Goal = THROUGHPUT,
    outlier_side: str = "defaults",
) -> Verdict:
    """One study, search to verdict; returns the verdict."""
    n = landscape.size
    at = int(rng.integers(0, 4))
    world = World(landscape, cv, drift, n + policy.screen + 2 * policy.cap, rng, outlier, at, outlier_side, goal=goal)
    configs = tuple(Config(i, baseline=i == 0, flags_changed=0 if i == 0 else 1 + i % 3) for i in range(n))
    base_run = world.run(0, Role.SEARCH)
    runs: list[Run] = [base_run]
    runs += [world.run(i, Role.SEARCH, base_run) for i in range(1, n)]
    runs.append(world.run(0, Role.PROOF, base_run))  # the end-of-search sentinel
    ev = Evidence(configs, tuple(runs))
    for _ in range(MAX_STEPS):
        step = next_step(ev, goal, policy)
        if isinstance(step, Done):
            return step.verdict
        ev = ev.with_run(world.run(step.config, step.role, base_run))
    raise RuntimeError("the verdict never finished: a bug in verdict/engine.py")


@dataclass(frozen=True)
class Rate:
    """`hits` of `n` studies, with a 95% Wilson interval."""

    hits: int
    n: int

    @property
    def rate(self) -> float:
        return self.hits / self.n if self.n else math.nan

    def interval(self) -> tuple[float, float]:
        if not self.n:
            return math.nan, math.nan
        z, p, n = 1.96, self.rate, self.n
        center = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(center - half, 0.0), min(center + half, 1.0)

    def text(self) -> str:
        low, high = self.interval()
        return f"{self.rate * 100:.1f}% [{low * 100:.1f}, {high * 100:.1f}]"


def false_wins(verdicts: Sequence[Verdict]) -> Rate:
    """Studies where nothing beats the defaults but a changed config was named."""
    return Rate(sum(1 for v in verdicts if v.kind.changes_flags), len(verdicts))


def found(verdicts: Sequence[Verdict], better: set[int]) -> Rate:
    """Studies that named a config from `better` (the truly better ones)."""
    return Rate(sum(1 for v in verdicts if v.kind.changes_flags and v.named in better), len(verdicts))
