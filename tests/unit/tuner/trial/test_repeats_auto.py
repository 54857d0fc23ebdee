"""`--repeats auto`: measure again on the same server until the objective's 95% confidence
half-width is within 3% of its mean, or 5 runs; the metrics say how many it took.

The tests here start no process; those that do are in tests/integration/tuner/trial/test_repeats_auto.py."""

from __future__ import annotations

import pytest

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.errors import SpecError
from kvtune.study.spec import AUTO_MAX_REPEATS, StudySpec
from kvtune.tuner.trial.measure import measure_repeats
from kvtune.workload import Workload

W = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1)


def bench_giving(values: list[float]):
    calls: list[int] = []

    def bench(url: str, w: Workload, options: BenchOptions) -> BenchRun:
        v = values[len(calls)]
        calls.append(1)
        return BenchRun([], [], 1.0, {"output_throughput": v})

    return bench, calls


def test_steady_figures_stop_after_two_runs():
    bench, calls = bench_giving([100.0, 100.1, 99.0, 101.0, 100.0])  # 95% CI +-0.6% after two
    m = measure_repeats(bench, "http://x", W, AUTO_MAX_REPEATS, BenchOptions("m"), converge_on="output_throughput")
    assert len(calls) == 2 and m.metrics["repeats"] == 2.0


def test_noisy_figures_run_to_the_cap():
    bench, calls = bench_giving([100.0, 140.0, 80.0, 130.0, 90.0])
    m = measure_repeats(bench, "http://x", W, AUTO_MAX_REPEATS, BenchOptions("m"), converge_on="output_throughput")
    assert len(calls) == AUTO_MAX_REPEATS and m.metrics["repeats"] == float(AUTO_MAX_REPEATS)


def test_fixed_repeats_ignore_convergence():
    bench, calls = bench_giving([100.0, 100.0, 100.0])
    measure_repeats(bench, "http://x", W, 3, BenchOptions("m"))
    assert len(calls) == 3


def test_spec_takes_auto_and_rejects_other_words():
    assert StudySpec(repeats="auto").validate().repeat_plan == (AUTO_MAX_REPEATS, True)
    assert StudySpec(repeats=3).validate().repeat_plan == (3, False)
    with pytest.raises(SpecError, match="repeats"):
        StudySpec(repeats="often").validate()
    with pytest.raises(SpecError, match="repeats"):
        StudySpec(repeats=0).validate()
