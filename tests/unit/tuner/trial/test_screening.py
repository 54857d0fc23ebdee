"""Screen short, measure long only what can still win (tuner/trial/screening.py), on injected
fake requests and a fake bench: the rule's margin, the watch's one decision point, the leader,
and a screened run inside `measure_repeats` (cut, marked, told apart from the early stop)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from kvtune.bench.client import BenchOptions, BenchRun
from kvtune.kinds import Direction
from kvtune.knobs import Candidate
from kvtune.objectives.metrics import RequestSample, summarize_requests
from kvtune.objectives.targets import parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.trial.measure import measure_repeats
from kvtune.tuner.trial.screening import (
    SCREEN_Z,
    SCREENED,
    Leader,
    ScreenWatch,
    can_still_win,
    leader_of,
    short_figure,
)
from kvtune.workload import Workload

UP = Leader(value=30.0, key="output_throughput", direction=Direction.MAXIMIZE, rel_sd=0.10)
DOWN = Leader(value=200.0, key="p95_ttft_ms", direction=Direction.MINIMIZE, rel_sd=0.10)


def _margin(observed: int, planned: int, rel_sd: float = 0.10) -> float:
    return math.exp(SCREEN_Z * rel_sd * math.sqrt(1 + planned / observed))


def test_a_config_is_cut_only_beyond_the_noise_margin_both_directions() -> None:
    edge = 30.0 / _margin(4, 8)  # the slowest short figure that can still reach 30 tok/s
    assert can_still_win(edge * 1.001, 4, 8, UP)
    assert not can_still_win(edge * 0.999, 4, 8, UP)
    slow = 200.0 * _margin(4, 8)  # the highest TTFT that can still reach 200 ms
    assert can_still_win(slow * 0.999, 4, 8, DOWN)
    assert not can_still_win(slow * 1.001, 4, 8, DOWN)


def test_a_shorter_run_or_a_noisier_study_keeps_more_configs() -> None:
    figure = 18.0  # 40% behind a 30 tok/s leader
    assert not can_still_win(figure, 4, 8, UP)
    assert can_still_win(figure, 1, 8, UP)  # one request of eight says too little
    assert can_still_win(figure, 4, 8, Leader(30.0, "output_throughput", Direction.MAXIMIZE, 0.2))


@pytest.mark.parametrize("figure", [0.0, -1.0, math.nan, math.inf])
def test_a_figure_that_is_no_positive_number_never_cuts(figure: float) -> None:
    assert can_still_win(figure, 4, 8, UP)


def _requests(n: int, tokens: int = 16, gap_s: float = 1.0) -> list[RequestSample]:
    """`n` requests sent at 0 and ended one every `gap_s` seconds."""
    return [
        RequestSample(
            send_time=0.0, ok=True, ttft_s=0.1, e2el_s=gap_s * (i + 1), output_tokens=tokens, end_time=gap_s * (i + 1)
        )
        for i in range(n)
    ]


def test_the_short_figure_is_the_clients_summary_of_those_requests() -> None:
    reqs = _requests(4)
    assert short_figure(reqs, "output_throughput") == pytest.approx(4 * 16 / 4.0)
    assert short_figure(reqs, "output_throughput") == summarize_requests(reqs, 4.0)["output_throughput"]
    assert short_figure(reqs, "energy_per_token_j") is None  # not computable from requests alone
    assert short_figure([], "output_throughput") is None


def test_the_watch_decides_once_at_its_share_of_the_planned_requests() -> None:
    watch = ScreenWatch(UP, planned=8, fraction=0.5)
    slow = _requests(8, gap_s=2.0)  # 8 tok/s: far behind 30
    reasons = [watch(s) for s in slow[:3]]
    assert reasons == [None, None, None]
    reason = watch(slow[3])
    assert reason is not None and reason.startswith("screened out") and watch.fired == reason
    fast = ScreenWatch(UP, planned=8, fraction=0.5)
    assert all(fast(s) is None for s in _requests(8, gap_s=0.55))  # 29 tok/s: within the noise
    assert fast.fired is None


def test_no_watch_without_a_leader_a_count_or_a_share_before_the_last_request() -> None:
    assert ScreenWatch.over(None, 8, 0.5) is None
    assert ScreenWatch.over(UP, None, 0.5) is None
    assert ScreenWatch.over(UP, 8, 0.0) is None
    assert ScreenWatch.over(UP, 2, 0.9) is None  # ceil(1.8) = 2: the last request decides nothing
    assert ScreenWatch.over(UP, 8, 0.5) is not None


def _outcome(
    number: int, value: float, feasible: bool = True, screened: bool = False, baseline: bool = False
) -> TrialOutcome:
    o = TrialOutcome(
        number=number, candidate=Candidate(flags={"p": number}), argv=[], env={}, launched=True, baseline=baseline
    )
    o.metrics = {"output_throughput": value, **({SCREENED: 1.0} if screened else {})}
    o.constraints = {"t": -1.0 if feasible else 1.0}
    o.objective = value
    return o


def test_the_leader_is_the_best_feasible_config_measured_in_full() -> None:
    outcomes = [
        _outcome(0, 20.0, baseline=True),
        _outcome(1, 40.0, feasible=False),  # misses a target: no leader
        _outcome(2, 50.0, screened=True),  # a short run's figure: no leader
        _outcome(3, 25.0),
    ]
    assert outcomes[0].feasible and not outcomes[1].feasible
    leader = leader_of(outcomes, "output_throughput", Direction.MAXIMIZE, 0.12)
    assert leader == Leader(25.0, "output_throughput", Direction.MAXIMIZE, 0.12)
    low = leader_of(outcomes, "output_throughput", Direction.MINIMIZE, 0.12)
    assert low is not None and low.value == 20.0
    assert leader_of(outcomes[1:3], "output_throughput", Direction.MAXIMIZE, 0.1) is None


@dataclass
class RequestBench:
    """A closed loop that ends one request every `gap_s` s and hands each to `stop_when`, as the
    real client does (the deciding request is kept, the rest cancelled)."""

    gap_s: float
    calls: list[Workload] = field(default_factory=list)

    def __call__(self, base_url: str, w: Workload, options: BenchOptions) -> BenchRun:
        self.calls.append(w)
        kept: list[RequestSample] = []
        reason = None
        for s in _requests(w.num_requests, tokens=w.output_tokens, gap_s=self.gap_s):
            kept.append(s)
            reason = options.stop_when(s) if options.stop_when else None
            if reason:
                break
        duration = max(s.end_time or 0.0 for s in kept)
        run = BenchRun(kept, [], duration, summarize_requests(kept, duration), stopped=reason, planned=w.num_requests)
        run.sent = len(kept)
        return run


W = Workload(concurrency=1, prompt_tokens=16, output_tokens=16, num_requests=8, warmup_requests=0)


def test_measure_repeats_cuts_a_losing_config_and_skips_its_other_repeats() -> None:
    bench = RequestBench(gap_s=2.0)  # 8 tok/s against a 30 tok/s leader
    m = measure_repeats(bench, "http://x", W, 2, BenchOptions("m"), leader=UP, screen_fraction=0.5)
    assert m.screened and m.stopped and m.stopped.startswith("screened out")
    assert len(bench.calls) == 1 and len(m.bench_runs[0].samples) == 8  # 8 of 16 planned over 2 repeats
    assert m.metrics[SCREENED] == 1.0 and m.metrics["screen_saved_s"] == pytest.approx(16.0)


def test_measure_repeats_measures_a_contender_in_full_and_ignores_the_screen_when_off() -> None:
    close = measure_repeats(
        RequestBench(gap_s=0.6), "http://x", W, 1, BenchOptions("m"), leader=UP, screen_fraction=0.5
    )
    assert not close.screened and close.stopped is None and SCREENED not in close.metrics
    off = measure_repeats(RequestBench(gap_s=2.0), "http://x", W, 1, BenchOptions("m"), leader=UP, screen_fraction=0.0)
    assert not off.screened and len(off.bench_runs[0].samples) == 8


def test_a_target_lost_at_the_same_request_is_the_early_stops_not_the_screens() -> None:
    lost = [parse_target("ttft_p95<50ms")]  # every request's TTFT is 100 ms
    m = measure_repeats(
        RequestBench(gap_s=2.0), "http://x", W, 1, BenchOptions("m"), lost, leader=UP, screen_fraction=0.5
    )
    assert m.stopped and not m.screened and SCREENED not in m.metrics
    assert m.metrics["early_stopped"] == 1.0


@pytest.mark.parametrize("share", [1.0, -0.1, 1.5])
def test_a_share_outside_0_to_1_is_a_one_line_error_naming_the_setting(share: float) -> None:
    from kvtune.errors import KvtuneError
    from kvtune.study.spec import StudySpec

    with pytest.raises(KvtuneError) as e:
        StudySpec(screen_fraction=share).validate()
    assert "screen_fraction" in str(e.value) and "\n" not in str(e.value)


def test_the_real_load_client_is_cut_at_the_screen_point_on_the_fake_server() -> None:
    """The load client's own hook (MockOpenAI on virtual time, no socket): a server far slower
    than the leader is cut after half the planned requests, its short figure is the client's."""
    from kvtune.bench.client import run
    from kvtune.testing.mock_openai import MockOpenAI

    srv = MockOpenAI(ttft_s=0.05, itl_s=0.05)
    w = Workload(concurrency=2, prompt_tokens=8, output_tokens=8, num_requests=16, warmup_requests=1)

    def bench(url: str, wl: Workload, o: BenchOptions) -> BenchRun:
        return run(
            srv.base_url, wl, BenchOptions("m", transport=srv.transport(), clock=srv.clock, stop_when=o.stop_when)
        )

    far = Leader(value=1000.0, key="output_throughput", direction=Direction.MAXIMIZE, rel_sd=0.10)
    m = measure_repeats(bench, srv.base_url, w, 1, BenchOptions("m"), leader=far, screen_fraction=0.5)
    assert m.screened and len(m.bench_runs[0].samples) == 8 and m.metrics[SCREENED] == 1.0
    assert short_figure(m.bench_runs[0].samples, "output_throughput") == pytest.approx(
        m.bench_runs[0].metrics["output_throughput"], rel=0.05
    )
    near = Leader(
        value=m.metrics["output_throughput"], key="output_throughput", direction=Direction.MAXIMIZE, rel_sd=0.10
    )
    whole = measure_repeats(bench, srv.base_url, w, 1, BenchOptions("m"), leader=near, screen_fraction=0.5)
    assert not whole.screened and len(whole.bench_runs[0].samples) == 16


def test_the_search_screens_against_the_studys_leader_with_its_measured_noise() -> None:
    """AskTell._leader: the best feasible full measurement of the study's primary objective, the
    study's noise (the 10% prior here: nothing measured twice); none when screening is off or
    the study has several objectives."""
    from types import SimpleNamespace

    from kvtune.study.spec import StudySpec
    from kvtune.tuner.ask_tell import AskTell

    outcomes = [_outcome(0, 20.0, baseline=True), _outcome(1, 26.0), _outcome(2, 40.0, feasible=False)]
    records = SimpleNamespace(outcomes=lambda: outcomes)

    def leader(**settings: object) -> Leader | None:
        ctx = SimpleNamespace(what=SimpleNamespace(spec=StudySpec(**settings).validate()))  # type: ignore[arg-type]
        return AskTell(ctx, None, records, None, None, None)._leader()  # type: ignore[arg-type]

    assert leader() == Leader(26.0, "output_throughput", Direction.MAXIMIZE, 0.10)
    assert leader(screen_fraction=0.0) is None
    assert leader(objective=["output_throughput", "ttft_p95"]) is None
