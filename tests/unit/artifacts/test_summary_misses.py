"""Issue 22 §6: when every feasible config fails its re-measurement, the nearest misses say why,
and the report and `kvtune show` do not count them feasible."""

from __future__ import annotations

import json

from kvtune.artifacts import overview as ov
from kvtune.artifacts.report import render_report
from kvtune.artifacts.summary import nearest_misses
from kvtune.jsonsafe import dumps
from kvtune.knobs import Candidate
from kvtune.objectives.objective import objective
from kvtune.objectives.targets import parse_target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import build_payload


def failed_remeasurement(number: int, baseline: bool = False) -> TrialOutcome:
    o = TrialOutcome(
        number=number,
        candidate=Candidate(flags={} if baseline else {"threads": number}),
        argv=["srv"],
        env={},
        baseline=baseline,
        metrics={"output_throughput": 50.0, "p95_ttft_ms": 800.0, "error_rate": 0.0},
        constraints={"ttft_p95": -0.2, "server_ran": -1.0},
        objective=50.0,
        objectives=[50.0],
    )
    o.confirmation = {
        "metrics": {"output_throughput": 30.0, "p95_ttft_ms": 1500.0, "error_rate": 0.0},
        "objective": 30.0,
        "objectives": [30.0],
        "feasible": False,
        "reason": "missed target ttft<1s: p95 TTFT 1500 ms",
    }
    return o


def test_nearest_misses_give_the_re_measurements_reason():
    outs = [failed_remeasurement(0, baseline=True), failed_remeasurement(1)]
    misses = nearest_misses(outs, [parse_target("ttft<1s")])
    assert [m.outcome.number for m in misses] == [0, 1]
    for m in misses:
        assert m.outcome.reason == ""  # the first measurement met the targets: no reason of its own
        assert "failed its re-measurement on a fresh server: missed target ttft<1s" in m.reason


def test_the_report_and_show_do_not_count_them_feasible():
    outs = [failed_remeasurement(0, baseline=True), failed_remeasurement(1)]
    payload = json.loads(
        dumps(
            build_payload(
                "gone",
                {"objective": "output_throughput"},
                {},
                "v",
                ["ttft<1s"],
                (objective("output_throughput"),),
                outs,
            )
        )
    )
    assert payload["best_trial"] is None
    info = ov.overview(payload)
    assert info["counts"]["feasible"] == 0 and info["counts"]["not_held"] == 2
    assert info["counts"]["infeasible"] == 2
    assert [g["category"] for g in info["failures"]] == [ov.NOT_HELD]
    html = render_report(payload)
    assert "0 feasible, 2 not (2 failed the re-measurement)" in html


def test_a_config_that_met_the_targets_only_on_a_busy_machine_says_so_as_a_miss():
    """A smoke run on a loaded machine printed "No feasible config" with empty reasons: every
    measurement met the targets but stayed disturbed, so none was evidence. The miss says that."""
    busy = TrialOutcome(
        number=1,
        candidate=Candidate(flags={"threads": 1}),
        argv=["srv"],
        env={},
        metrics={"output_throughput": 50.0, "p95_ttft_ms": 800.0, "error_rate": 0.0},
        constraints={"ttft_p95": -0.2, "server_ran": -1.0},
        objective=50.0,
        objectives=[50.0],
        interference={"disturbed": True, "foreign_cores": 1.5, "reason": "disturbed: foreign CPU 1.50 cores"},
    )
    [miss] = nearest_misses([busy], [parse_target("ttft<1s")])
    assert miss.reason.startswith("met the targets, but every measurement of it was disturbed")
    assert "foreign CPU 1.50 cores" in miss.reason and "quiet" in miss.reason
