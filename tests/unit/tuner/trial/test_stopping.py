"""The early stop wired to a measurement (tuner/trial/stopping.py): which targets a trial's watch
may judge, how many requests a run plans, the watch itself over all repeats, and the time a stop
saved. Pure: request samples built in the test, no load client, no clock."""

from __future__ import annotations

from kvtune.objectives.metrics import RequestSample
from kvtune.objectives.targets import parse_target, parse_targets
from kvtune.tuner.trial.stopping import RunWatch, planned_requests, saved_seconds, watched_targets
from kvtune.workload import Workload

WL = Workload(
    concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=16, warmup_requests=1, request_timeout_s=10
)


def sample(ttft_s: float, ok: bool = True) -> RequestSample:
    return RequestSample(send_time=0.0, ok=ok, ttft_s=ttft_s, e2el_s=ttft_s + 0.1, output_tokens=4)


# ---- planned_requests and saved_seconds (moved from test_early_stop_loop.py) --------------------
def test_planned_requests_and_the_saving_estimate():
    assert planned_requests(WL) == 16
    assert planned_requests(Workload(duration_s=30)) is None  # a timed closed loop: no count
    assert planned_requests(Workload(multiturn=True, turns=4, num_requests=10)) == 12  # 3 conversations of 4
    assert planned_requests(Workload(multiturn=True, dataset="sg.json")) is None  # turns differ per record
    open_timed = Workload(mode="open", rate=2.0, arrival="constant", duration_s=10)
    assert planned_requests(open_timed) == 20
    assert saved_seconds(32, 8, 10.0) == 30.0  # 32/8 x 10 s - 10 s, 8 sent so far
    assert saved_seconds(32, 32, 10.0) == 0.0 and saved_seconds(32, 0, 10.0) == 0.0


def test_an_open_loop_with_a_count_plans_that_count():
    assert planned_requests(Workload(mode="open", rate=4.0, num_requests=12)) == 12


def test_nothing_was_saved_without_elapsed_time_or_when_more_was_sent_than_planned():
    assert saved_seconds(32, 8, 0.0) == 0.0
    assert saved_seconds(32, 40, 10.0) == 0.0


# ---- watched_targets --------------------------------------------------------------------------
def test_relative_targets_are_resolved_and_never_watch_the_baseline():
    targets = parse_targets(["ttft_p95<1.5x", "tpot_p95<200ms"])
    assert watched_targets(targets, baseline=True, baseline_metrics={"p95_ttft_ms": 100}) == []
    # no (quiet) baseline figures yet: only the absolute targets are watched (tuner/anchor.py)
    assert watched_targets(targets, baseline=False, baseline_metrics=None) == [targets[1]]
    resolved = watched_targets(targets, baseline=False, baseline_metrics={"p95_ttft_ms": 100.0})
    assert [t.threshold for t in resolved] == [150.0, 200.0]
    absolute = parse_targets(["ttft<1s"])
    assert watched_targets(absolute, baseline=False, baseline_metrics=None) == absolute
    assert watched_targets(absolute, baseline=True, baseline_metrics=None) == []  # measured in full


def test_a_baseline_without_the_relative_figure_watches_nothing():
    targets = parse_targets(["ttft_p95<1.5x", "tpot_p95<200ms"])
    assert watched_targets(targets, baseline=False, baseline_metrics={"p95_tpot_ms": 10.0}) == []


# ---- RunWatch ---------------------------------------------------------------------------------
def test_a_target_decided_by_the_last_request_is_not_an_early_stop():
    """Losing the target on the 4th of 4 planned requests cut nothing: no 'stopped' reason."""
    watch = RunWatch([parse_target("ttft_p95<1s")], planned=4)
    fast, slow = sample(0.1), sample(2.0)
    assert [watch(s) for s in (fast, fast, fast)] == [None, None, None]
    assert watch(slow) is None  # p95 of 4 breaks only now, when the run is over anyway
    early = RunWatch([parse_target("ttft_p95<1s")], planned=4)
    reason = early(slow)  # one of 4 over 1 s already breaks the p95 whatever the other 3 do
    assert reason is not None and "stopped after 1 of 4" in reason


def test_past_the_planned_count_the_watch_never_stops():
    watch = RunWatch([parse_target("ttft_p95<1s")], planned=2)
    assert [watch(sample(0.1)) for _ in range(2)] == [None, None]
    assert watch.rule.observed == 2
    assert watch(sample(9.0)) is None  # the proof covered 2 requests, not a third


def test_over_plans_every_repeat_of_the_workload():
    watch = RunWatch.over([parse_target("ttft_p95<1s")], WL, repeats=3)
    assert watch is not None and watch.planned == 3 * WL.num_requests


def test_over_is_none_when_nothing_could_ever_stop_the_run():
    ttft = [parse_target("ttft_p95<1s")]
    assert RunWatch.over(ttft, Workload(duration_s=30), repeats=2) is None  # no planned count
    assert RunWatch.over(ttft, Workload(num_requests=0), repeats=2) is None
    assert RunWatch.over([parse_target("output_throughput>50")], WL, repeats=1) is None  # not provable
    assert RunWatch.over([parse_target("ttft_p95<1.5x")], WL, repeats=1) is None  # unresolved
