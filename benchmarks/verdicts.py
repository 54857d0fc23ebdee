"""The verdict's error rates, measured: thousands of simulated studies through the real code.

Each study runs on virtual time (src/kvtune/testing/verdict_sim.py): every config of the landscape
measured once by the search, the defaults' end-of-search sentinel, then `verdict.next_step`
asked what to measure until it is done, exactly as the tuner's confirmation asks it. No servers.

Printed, one row per cell, with 95% Wilson intervals:
- null landscapes (nothing beats the defaults) at CV 5-20%, 6-60 trials, drift 0/+10%/-10% over
  the study and one undetected outlier: x0.5 or x1.5 among the defaults' first measurements, or
  x1.5 among the candidate's first proof runs: the rate of a false "beats the defaults" (the
  contract: at most 5%; its ratio to 5% is printed);
- a needle (one config truly +20% or +10%) and a spread landscape (one +20%, the others 0-40%
  worse): the power, the share of studies that named the truly better config (the contract: at
  least 80% for +20% at CV 10%; its ratio to 80% is printed);
- several configs better than the defaults (one +20%, five +5..+15%, the rest equal; CV 5-20%,
  6-60 trials): the share of studies that named some better config, and one within 5% of the
  best (the contract at CV 10% and 20 trials: at least 80% of each, at the budget docs/verdicts.md
  states; the default budget's row is printed beside it);
- a latency target (tpot_p95<0.7x): the chance of naming a config whose TPOT is at the bound
  (false), and of naming one clearly under it.

    .venv/bin/python benchmarks/verdicts.py              # issue 40's counts: 2,000 / 1,000 per cell
    .venv/bin/python benchmarks/verdicts.py --studies 1000 --power-studies 500   # docs/verdicts.md's table
    .venv/bin/python benchmarks/verdicts.py --studies 500 --quick   # a smaller grid, a few minutes

(The second took 29 minutes on a 2-core machine shared with other work, load average 10-17.)

Power cells run `--power-studies` studies (default half of `--studies`). Exit status 1 when a
null cell's upper bound exceeds 6%, or a power the contract holds is shown under 80% (its whole
interval below; where `_power_contract` holds it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from kvtune.testing import verdict_sim as sim
from kvtune.verdict import DecisionKind, Policy

BOUND = 0.05  # the contract's false-win rate
BOUND_UPPER = 0.06  # what the upper end of its 95% interval may reach
POWER = 0.80  # the contract's power for +20% at CV 10%


@dataclass(frozen=True)
class Cell:
    """One row: a landscape kind, its noise, trials, drift and outlier."""

    kind: str  # null, needle, spread, several, latency-bound, latency-clear
    cv: float
    trials: int
    drift: float = 0.0
    outlier: float | None = None
    effect: float = 0.0
    outlier_side: str = "defaults"  # or "candidate" (its first proof runs)
    budget: tuple[int, int, int] | None = None  # (confirm_top, screening rounds, confirm_pairs); None: the default

    def label(self) -> str:
        parts = [self.kind, f"CV {self.cv:.0%}", f"{self.trials} trials"]
        if self.effect:
            parts.append(f"effect {self.effect:+.0%}")
        if self.drift:
            parts.append(f"drift {self.drift:+.0%}")
        if self.outlier is not None:
            side = " on the candidate" if self.outlier_side == "candidate" else ""
            parts.append(f"outlier x{self.outlier:g}{side}")
        if self.budget is not None:
            top, rounds, pairs = self.budget
            parts.append(f"top {top}, {rounds} screening rounds, {pairs} pairs")
        return ", ".join(parts)

    @property
    def false(self) -> bool:
        """Counts false wins (else: correct namings)."""
        return self.kind in ("null", "latency-bound")

    def policy(self) -> Policy:
        if self.budget is None:
            return Policy()
        top, rounds, pairs = self.budget
        return Policy(screen=top, screen_rounds=rounds, cap=pairs)


def run_cell(cell: Cell, studies: int, seed: int) -> tuple[Cell, int, int, int, float, float]:
    """(cell, hits, within, studies, mean proof pairs, mean screening runs): hits are false wins
    (null, latency-bound) or correct namings (the others); within: namings of a config within 5%
    of the best (several)."""
    rng = np.random.default_rng(seed)
    hits, within, pairs, screened = 0, 0, 0, 0
    for _ in range(studies):
        verdict, better, best = _one(cell, rng)
        pairs += verdict.counted.pairs
        screened += verdict.counted.screened
        named_changed = verdict.kind.changes_flags
        if cell.false:
            hits += named_changed
        else:
            hits += named_changed and verdict.named in better
            within += named_changed and verdict.named in best
    return cell, hits, within, studies, pairs / studies, screened / studies


def _one(cell: Cell, rng: np.random.Generator):
    """One study of `cell`: its verdict, the truly better configs, those within 5% of the best."""
    policy = cell.policy()
    if cell.kind == "null":
        land, better = sim.null(cell.trials), set()
    elif cell.kind == "needle":
        land, better = sim.needle(cell.trials, cell.effect), {1}
    elif cell.kind == "spread":
        land, better = sim.spread(cell.trials, cell.effect, rng), {1}
    elif cell.kind == "several":
        land = sim.several(cell.trials, rng)
        better = {i for i, v in enumerate(land.objective) if v > 1.0}
    else:
        ratio = 0.7 if cell.kind == "latency-bound" else 0.5
        land, better = sim.latency(cell.trials, ratio), set(range(1, cell.trials))
        goal = sim.latency_goal(0.7)
        verdict = sim.simulate(land, cell.cv, rng, policy, cell.drift, cell.outlier, goal, cell.outlier_side)
        return verdict, better, better
    top = max(land.objective)
    best = {i for i, v in enumerate(land.objective) if v > 1.0 and v * 1.05 >= top}
    verdict = sim.simulate(land, cell.cv, rng, policy, cell.drift, cell.outlier, outlier_side=cell.outlier_side)
    return verdict, better, best


# The budget docs/verdicts.md states for the several-better contract (confirm_top, screening
# rounds, confirm_pairs): the default reaches neither 80% there (docs/verdicts.md says why).
SEVERAL_BUDGET = (8, 15, 15)


def grid(quick: bool) -> list[Cell]:
    cvs = (0.1, 0.2) if quick else (0.05, 0.1, 0.15, 0.2)
    trials = (6, 20) if quick else (6, 20, 60)
    cells = [
        Cell("null", cv, n, drift, outlier)
        for cv in cvs
        for n in trials
        for drift in (0.0, 0.1, -0.1)
        for outlier in (None, 0.5)
        if not quick or drift >= 0
    ]
    cells += [
        Cell("null", cv, n, outlier=m, outlier_side=side)
        for cv in cvs
        for n in (6, 20)
        for side, m in (("candidate", 1.5), ("defaults", 1.5))
    ]
    cells += [Cell("needle", cv, n, effect=e) for cv in cvs for n in trials for e in (0.2, 0.1)]
    cells += [Cell("spread", cv, n, effect=0.2) for cv in cvs for n in trials]
    cells += [Cell("several", cv, n) for cv in cvs for n in trials]
    cells += [Cell("several", 0.1, 20, budget=SEVERAL_BUDGET)]
    cells += [Cell(k, cv, 6) for k in ("latency-bound", "latency-clear") for cv in cvs]
    return cells


def _power_contract(cell: Cell) -> bool:
    """The cells the 80% power contract covers: +20% at CV 10%, with one config truly better and
    the others worse (spread, any trials), or among 6 trials (needle); and several better configs
    at CV 10% and 20 trials at the budget docs/verdicts.md states. A needle among 20-60 configs
    as good as the defaults is printed, not held to it: there the search and screening, not the
    test, miss the one better config (docs/verdicts.md)."""
    if cell.kind == "several":
        return cell.budget is not None
    if cell.effect != 0.2 or cell.cv != 0.1:
        return False
    return cell.kind == "spread" or (cell.kind == "needle" and cell.trials == 6)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, default=2000, help="simulated studies per cell (default 2000)")
    ap.add_argument("--quick", action="store_true", help="a smaller grid")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--power-studies", type=int, default=None, help="studies per power cell (default: half)")
    args = ap.parse_args(argv)
    cells = grid(args.quick)
    power = args.power_studies or max(args.studies // 2, 1)
    counts = [args.studies if c.false else power for c in cells]
    began = time.monotonic()
    print(
        f"# kvtune verdict error rates: {args.studies} simulated studies per null cell, {power} per power cell, "
        f"seed {args.seed}"
    )
    print(f"# policy {Policy()} ({DecisionKind.BEATS_DEFAULTS.value!r} counts as a win)")
    print("| cell | measured | rate [95% CI] | ratio to reference | mean proof pairs | mean screening runs |")
    print("|---|---|---|---|---|---|", flush=True)
    failed = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(run_cell, cells, counts, [args.seed + i for i in range(len(cells))])
        failed = _print_rows(results)
    print(f"# {len(cells)} cells in {time.monotonic() - began:.0f} s")
    if failed:
        print("# contract not met: " + "; ".join(failed))
        return 1
    print(
        "# contract met: every null cell's upper bound <= 6%; power >= 80% for +20% at CV 10% "
        "(spread, any trials; needle, 6 trials; several, 20 trials, at the stated budget)"
    )
    return 0


def _print_rows(results: Iterable[tuple[Cell, int, int, int, float, float]]) -> list[str]:
    """Print each cell's rows as it finishes (a long run shows its progress); the cells whose
    contract is not met."""
    failed = []
    for cell, hits, within, n, pairs, screened in results:
        rows = [("false wins" if cell.false else "named a better config", sim.Rate(hits, n))]
        if cell.kind == "several":
            rows.append(("named within 5% of the best", sim.Rate(within, n)))
        for what, rate in rows:
            ref = f"{rate.rate / BOUND:.2f} of 5%" if cell.false else f"{rate.rate / POWER:.2f} of 80%"
            print(f"| {cell.label()} | {what} | {rate.text()} | {ref} | {pairs:.1f} | {screened:.1f} |", flush=True)
            if cell.kind == "null" and rate.interval()[1] > BOUND_UPPER:
                failed.append(cell.label())
            if _power_contract(cell) and rate.interval()[1] < POWER:  # shown below 80%
                failed.append(f"{cell.label()} ({what})")
    return failed


if __name__ == "__main__":
    sys.exit(main())
