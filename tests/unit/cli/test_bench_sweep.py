"""`kvtune bench --rate 1,2,4,8` (cli/bench_sweep.py, issue 30 item 4): the rate list parsed,
one open-loop run per rate of the same workload, the goodput curve's rows, and the exit status
a deployment script reads. Runs go to the virtual fake server (no socket)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from kvtune.bench.client import BenchOptions, run
from kvtune.cli.bench_sweep import (
    SweepRow,
    check_sweep,
    curve_table,
    parse_rates,
    rate_unit,
    sweep,
    sweep_verdict,
)
from kvtune.errors import SpecError
from kvtune.objectives.targets import parse_targets
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload


def rendered(table) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    return out.getvalue()


def test_rates_are_one_number_or_a_list_run_in_ascending_order():
    assert parse_rates(None) is None and parse_rates("2.5") == [2.5]
    assert parse_rates("8, 1,4,2") == [1.0, 2.0, 4.0, 8.0]
    with pytest.raises(SpecError, match="--rate takes a number, got 'fast'"):
        parse_rates("1,fast")
    with pytest.raises(SpecError, match="--save writes one run's JSON"):
        check_sweep([1.0, 2.0], "r.json")
    check_sweep([1.0], "r.json")  # one rate: one run, saved as before


def test_each_rate_is_an_open_loop_run_of_the_same_workload_and_a_row_of_the_curve():
    seen: list[Workload] = []

    def run_one(w: Workload):
        seen.append(w)
        fake = MockOpenAI(ttft_s=0.02 * w.rate, itl_s=0.002)  # slower as the rate grows
        return run(fake.base_url, w, BenchOptions("m", transport=fake.transport(), clock=fake.clock))

    base = Workload(num_requests=6, warmup_requests=1, output_tokens=4, prompt_spread=0.3)
    targets = parse_targets(["ttft<100ms"])
    rows = sweep(base, [1.0, 2.0, 8.0], run_one, targets)
    assert [(w.mode, w.rate) for w in seen] == [("open", 1.0), ("open", 2.0), ("open", 8.0)]
    assert all(w.prompt_spread == 0.3 and w.seed == base.seed for w in seen)  # the same draws at every rate
    assert [r.rate for r in rows] == [1.0, 2.0, 8.0]
    assert [r.missed for r in rows] == [(), (), ("ttft_p95<100ms",)]  # 160 ms TTFT at 8 req/s
    assert all(r.metrics["completed"] == 6 for r in rows)
    text = rendered(curve_table(rows, goodput=False, targets=True))
    assert "p95 TTFT (ms)" in text and "goodput (req/s)" not in text and "missed ttft_p95<100ms" in text
    assert sweep_verdict(rows, targets) == ("highest rate meeting every target: 2 req/s", 0)


def test_goodput_is_a_column_when_asked_for_and_the_verdict_says_when_nothing_held():
    rows = [
        SweepRow(1.0, {"request_throughput": 0.98, "request_goodput": 0.9, "p95_ttft_ms": 40.0}, ("ttft_p95<10ms",)),
        SweepRow(2.0, {"request_throughput": 1.5, "request_goodput": 0.4, "p95_ttft_ms": float("inf")}, ("x",)),
    ]
    text = rendered(curve_table(rows, goodput=True, targets=False))
    assert "goodput (req/s)" in text and "0.90" in text and "inf" in text and "targets" not in text
    line, status = sweep_verdict(rows, parse_targets(["ttft<10ms"]))
    assert status == 1 and line == "no rate met every target (lowest tried: 1 req/s)"
    failed = [SweepRow(1.0, {"failed": 4, "num_requests": 4}, ())]
    assert sweep_verdict(failed, []) == ("every request of every rate failed", 1)
    assert sweep_verdict([SweepRow(1.0, {"failed": 0, "num_requests": 4}, ())], []) == ("", 0)


def test_a_sweep_of_conversations_counts_conversations_started_and_requests_achieved():
    """--rate with --workload multiturn starts conversations at the rate: the rate column and the
    verdict say conversations/s, the achieved column stays requests/s (each turn is one)."""
    conv = Workload(multiturn=True, turns=3, num_requests=6)
    assert rate_unit(conv) == "conversations/s" and rate_unit(Workload()) == "req/s"
    rows = [SweepRow(0.5, {"request_throughput": 1.4}, ())]
    text = rendered(curve_table(rows, goodput=False, targets=True, unit=rate_unit(conv)))
    assert "rate (conversations/s)" in text and "achieved (req/s)" in text
    assert sweep_verdict(rows, parse_targets(["ttft<1s"]), rate_unit(conv))[0] == (
        "highest rate meeting every target: 0.5 conversations/s"
    )
