"""Issue 22 §6: `--repeats auto` with a cost objective or an infinite figure raised ValueError."""

from __future__ import annotations

import math

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.study.spec import AUTO_MAX_REPEATS
from kvtune.tuner.trial.measure import measure_repeats
from kvtune.workload import Workload

W = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1)


def bench_giving(metrics: list[dict]):
    calls: list[int] = []

    def bench(url: str, w: Workload, options: BenchOptions) -> BenchRun:
        m = metrics[len(calls)]
        calls.append(1)
        return BenchRun([], [], 1.0, dict(m))

    return bench, calls


def test_a_cost_objective_converges_on_the_throughput_it_is_computed_from():
    # the cost key is added after the repeats, so no bench run carries it
    bench, calls = bench_giving([{"output_throughput": v} for v in (100.0, 100.1, 99.0, 101.0, 100.0)])
    m = measure_repeats(bench, "http://x", W, AUTO_MAX_REPEATS, BenchOptions("m"), converge_on="cost_per_mtok")
    assert len(calls) == 2 and m.metrics["repeats"] == 2.0


def test_an_infinite_figure_runs_to_the_cap_instead_of_raising():
    bench, calls = bench_giving([{"p95_ttft_ms": math.inf}] * AUTO_MAX_REPEATS)
    m = measure_repeats(bench, "http://x", W, AUTO_MAX_REPEATS, BenchOptions("m"), converge_on="p95_ttft_ms")
    assert len(calls) == AUTO_MAX_REPEATS and m.metrics["repeats"] == float(AUTO_MAX_REPEATS)
