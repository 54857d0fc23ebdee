"""Issue 41 §2: a "no" that says what would work, on injected trial outcomes.

The front door's case: every config missed `ttft<1s` at the load asked; some were stopped early
after two or three requests. The record names the best full figure per missed target and the
config that measured it, the nearest config by the stated rule, and the load search's answer or
the command that runs it; stopped trials never supply a figure.
"""

from __future__ import annotations

import json
import math

from kvtune.artifacts.summary import rerun_command, what_works
from kvtune.jsonsafe import dumps
from kvtune.knobs import Candidate
from kvtune.objectives.targets import parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.what_would_work import (
    NEAREST_RULE,
    LoadFound,
    WhatWouldWork,
    fully_measured,
    nearest,
    shortfall,
    what_would_work,
)

TTFT = parse_target("ttft<1s")
TPOT = parse_target("tpot<50ms")


def trial(n: int, ttft_ms: float, tpot_ms: float = 30.0, *, stopped: bool = False, **flags: object) -> TrialOutcome:
    metrics = {"p95_ttft_ms": ttft_ms, "p95_tpot_ms": tpot_ms, "error_rate": 0.0, "num_requests": 32.0}
    if stopped:
        metrics.update(early_stopped=1.0, num_requests=3.0)
    return TrialOutcome(
        number=n,
        candidate=Candidate(flags=dict(flags)),
        argv=["srv"],
        env={},
        baseline=n == 0,
        launched=True,
        metrics=metrics,
        constraints={"ttft_p95": ttft_ms / 1000.0 - 1.0, "server_ran": -1.0},
        reason="missed ttft<1s",
    )


def test_a_stopped_trial_is_never_a_full_measurement_and_says_how_many_requests_it_heard() -> None:
    stopped = trial(2, 2700.0, stopped=True, parallel=4)
    assert stopped.stopped_early and stopped not in fully_measured([stopped])
    assert stopped.evidence == "stopped early after 3 request(s), not a full measurement"
    assert trial(1, 2000.0).evidence == "measured once"
    assert json.loads(dumps(stopped.to_dict()))["evidence"].startswith("stopped early")


def test_the_best_figure_per_missed_target_comes_from_full_measurements_only() -> None:
    """An early stop's TTFT rests on its first requests (often the lowest): never the best figure."""
    outs = [trial(0, 8000.0), trial(1, 3100.0, parallel=2), trial(2, 900.0, stopped=True, parallel=4)]
    w = what_would_work(outs, [TTFT])
    [best] = w.missed
    assert (best.trial, best.figure, best.text, best.config) == (1, 3100.0, "3.1 s", "parallel=2")
    assert "best 3.1 s, by trial 1 (parallel=2)" in best.line()


def test_the_nearest_config_is_the_smallest_worst_shortfall_then_the_smallest_sum() -> None:
    """Trial 1 misses TTFT by 50% and TPOT by 0%; trial 2 misses both by 40%: the worst shortfall
    decides (2 is nearer), and the sum breaks a tie of worst shortfalls."""
    a = trial(1, 1500.0, 40.0, threads=1)
    b = trial(2, 1400.0, 70.0, threads=2)
    assert math.isclose(shortfall(TTFT, a.metrics or {}), 0.5)
    assert nearest([a, b], [TTFT, TPOT]) is b
    c = trial(3, 1400.0, 40.0, threads=3)  # the same worst shortfall as b, a smaller sum
    assert nearest([a, b, c], [TTFT, TPOT]) is c
    assert nearest([trial(4, 1200.0, stopped=True)], [TTFT]) is None  # no full measurement
    w = what_would_work([a, b, c], [TTFT, TPOT])
    assert w.nearest == 3 and w.rule == NEAREST_RULE
    assert w.nearest_shortfall["TTFT p95 < 1000 ms"] == 0.4
    assert [m.target for m in w.missed] == ["TTFT p95 < 1000 ms"]  # TPOT: trial 3 met it


def test_a_target_one_config_met_alone_is_listed_and_says_so() -> None:
    a = trial(1, 900.0, 80.0, threads=1)  # met TTFT, missed TPOT by 60%
    b = trial(2, 1300.0, 45.0, threads=2)  # missed TTFT by 30%: nearer
    w = what_would_work([a, b], [TTFT, TPOT])
    assert w.nearest == 2
    by_target = {m.target: m for m in w.missed}
    assert by_target["TTFT p95 < 1000 ms"].trial == 1 and by_target["TTFT p95 < 1000 ms"].met_alone
    assert "it met this target, but not every other one" in by_target["TTFT p95 < 1000 ms"].line()


def test_the_lines_give_the_load_that_holds_and_never_restate_a_miss() -> None:
    outs = [trial(0, 8000.0), trial(1, 2700.0, parallel=2)]
    levels = [{"load": 1.0, "status": "held", "recheck": False}, {"load": 2.0, "status": "broke", "recheck": False}]
    load = LoadFound(1, "users", 8.0, 1.0, 1.0, levels, seconds=95.0)
    text = "\n".join(what_would_work(outs, [TTFT], load).lines())
    assert "best 2.7 s, by trial 1 (parallel=2)" in text
    assert "Nearest config: trial 1 (parallel=2): TTFT p95 < 1000 ms 170% over" in text
    assert "trial 1 meets TTFT p95 < 1000 ms at 1 user on this box (asked: 8)" in text
    assert "1 launch, 2 level(s), 95 s" in text
    assert "would accept" not in text and "ttft_p95<8s" not in text
    none = LoadFound(1, "users", 8.0, 0.0, 1.0, levels[:1])
    assert "none on this box: trial 1 misses TTFT p95 < 1000 ms even at 1 user " in none.line("TTFT p95 < 1000 ms")
    judged = LoadFound(1, "users", 8.0, 3.0, 1.0, targets="TTFT p95 < 1000 ms")  # a fidelity gate is not judged
    assert "meets TTFT p95 < 1000 ms at 3 users" in judged.line("TTFT p95 < 1000 ms, KL divergence < 0.01")
    busy = LoadFound(1, "users", 8.0, 2.0, 1.0, levels, disturbed=True)
    assert "disturbed by the machine's other load: run again when it is quiet" in busy.line("t")
    bounded = LoadFound(1, "users", 64.0, 16.0, 1.0, levels, bounded=True)
    assert "meets t at 16 users or more (the level cap ended the search)" in bounded.line("t")


def test_the_record_round_trips_through_results_json() -> None:
    outs = [trial(0, 8000.0), trial(1, 2700.0, parallel=2)]
    w = what_would_work(outs, [TTFT], LoadFound(1, "users", 8.0, 3.0, 1.0))
    back = WhatWouldWork.from_dict(json.loads(dumps(w.to_dict())))
    assert back == w and back.lines() == w.lines()


def test_a_spent_time_budget_gives_the_command_that_finds_the_load() -> None:
    outs = [trial(0, 8000.0), trial(1, 2700.0, parallel=2)]
    payload = {"spec": {"objective": "output_throughput", "workload": {}}, "load_search": {"needs_s": 1500, "trial": 1}}
    w = what_works(payload, outs, [TTFT], "kvtune run --target 'ttft<1s' --time-budget 10m")
    assert w.load is None and w.not_searched == "the time budget was spent"
    assert w.command == "kvtune run --target 'ttft<1s' --time-budget 25m"
    assert f"to find it: {w.command}" in "\n".join(w.lines())
    assert rerun_command("", 90).endswith("<the same flags> --time-budget 1m30s")


def test_a_searched_load_comes_from_the_stored_record() -> None:
    outs = [trial(0, 8000.0), trial(1, 2700.0, parallel=2)]
    found = LoadFound(1, "users", 8.0, 2.0, 1.0).to_dict()
    w = what_works({"spec": {}, "load_search": {"load": found}}, outs, [TTFT], "")
    assert w.load is not None and w.load.held == 2.0 and not w.command
