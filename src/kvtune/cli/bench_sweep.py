"""`kvtune bench --rate 1,2,4,8`: a rate sweep, one open-loop run per rate against the same
server, printed as a goodput curve.

One rate is one number's question ("does it hold 4 req/s?"); a list asks where the server bends:
each rate is run with the same workload (the same seeded prompts, lengths and arrival draws
scaled to that rate), in ascending order, and the curve has one row per rate: the rate offered,
the rate achieved, output tokens per second, p95 TTFT and TPOT, and goodput (requests meeting
every latency target or the --slo, per second) when targets or an SLO are given. With
--target, each row says which targets it missed, and the sweep names the highest rate that
met them all; it exits 1 when no rate did (or every request of every rate failed), as one run
exits 1 on a miss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from rich.table import Table

from kvtune.errors import SpecError
from kvtune.objectives.targets import Target
from kvtune.workload import Workload


def parse_rates(text: Optional[str]) -> list[float] | None:
    """--rate: one number (one run) or a comma list (a sweep, run in ascending order); None
    when not given. Each rate is a positive ASCII number; its most is the setting's
    (`workload.rate`), checked with the workload (cli/bench.py)."""
    if text is None:
        return None
    rates = []
    for part in str(text).split(","):
        word = part.strip()
        try:
            if not word.isascii():  # float() reads '١٢' as 12, as no other flag of kvtune does
                raise ValueError(word)
            rate = float(word)
        except ValueError:
            raise SpecError(
                f"--rate takes a number, got {word!r}: requests per second, or a list such as 1,2,4,8"
            ) from None
        if not math.isfinite(rate) or rate <= 0:  # each rate of a list, not only the first
            raise SpecError(f"--rate must be a positive number of requests/s, got {word!r}")
        rates.append(rate)
    return sorted(rates)


def check_sweep(rates: list[float] | None, save: Any) -> None:
    """A sweep's flags that only one run can take are one line, exit 2, before any request."""
    if rates is not None and len(rates) > 1 and save:
        raise SpecError("--save writes one run's JSON: give --rate one number, or drop --save for a sweep")


@dataclass(frozen=True)
class SweepRow:
    """One rate of the curve: the rate offered, the run's metrics, the targets it missed."""

    rate: float
    metrics: dict
    missed: tuple[str, ...]

    def value(self, key: str) -> float | None:
        v = self.metrics.get(key)
        return None if v is None else float(v)


def sweep(
    workload: Workload, rates: list[float], run_one: Callable[[Workload], Any], targets: list[Target]
) -> list[SweepRow]:
    """Run `workload` as an open loop at each rate (`run_one` measures one workload); a row each."""
    rows = []
    for rate in rates:
        result = run_one(replace(workload, mode="open", rate=rate).validate())
        missed = tuple(t.constraint_key for t in targets if not t.met(result.metrics))
        rows.append(SweepRow(rate, dict(result.metrics), missed))
    return rows


def _cell(v: float | None, fmt: str) -> str:
    return "-" if v is None else ("inf" if v == float("inf") else format(v, fmt))


def rate_unit(workload: Workload) -> str:
    """What --rate counts: requests, or (multi-turn) conversations started per second; the
    achieved column is always requests per second (each turn is one)."""
    return "conversations/s" if workload.multiturn else "req/s"


def curve_table(rows: list[SweepRow], *, goodput: bool, targets: bool, unit: str = "req/s") -> Table:
    """The goodput curve: one row per rate; goodput and missed targets only when asked for."""
    table = Table(title="goodput curve")
    heads = [f"rate ({unit})", "achieved (req/s)", "output tok/s", "p95 TTFT (ms)", "p95 TPOT (ms)"]
    heads += ["goodput (req/s)"] if goodput else []
    heads += ["targets"] if targets else []
    for h in heads:
        table.add_column(h, justify="right")
    for r in rows:
        cells = [f"{r.rate:g}", _cell(r.value("request_throughput"), ".2f"), _cell(r.value("output_throughput"), ".1f")]
        cells += [_cell(r.value("p95_ttft_ms"), ".0f"), _cell(r.value("p95_tpot_ms"), ".1f")]
        cells += [_cell(r.value("request_goodput"), ".2f")] if goodput else []
        cells += [("missed " + ", ".join(r.missed)) if r.missed else "met"] if targets else []
        table.add_row(*cells)
    return table


def sweep_verdict(rows: list[SweepRow], targets: list[Target], unit: str = "req/s") -> tuple[str, int]:
    """The sweep's last line and exit status: the highest rate meeting every target (status 0),
    none (1); without targets 0 unless every request of every rate failed."""
    failed = all(r.metrics.get("failed", 0) and r.metrics.get("failed") == r.metrics.get("num_requests") for r in rows)
    if not targets:
        return ("every request of every rate failed" if failed else ""), 1 if failed else 0
    held = [r.rate for r in rows if not r.missed]
    if not held:
        return f"no rate met every target (lowest tried: {rows[0].rate:g} {unit})", 1
    return f"highest rate meeting every target: {max(held):g} {unit}", 0
