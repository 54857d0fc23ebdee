"""Capacity on a trace through the study loop: the fake server as a real process, the real load
client replaying a shipped trace on virtual time (VirtualBench), so the speed found is exact.

The fake's TTFT is 50 ms + 100 ms per other request in flight; the first 8 requests of the Azure
conversation excerpt span 8.25 s. Replayed faster, more of them overlap: ttft_p95<400ms holds up
to 14x its recorded rate and breaks at 15x and 16x."""

from __future__ import annotations

import json

from kvtune.knobs import Knob
from kvtune.study.capacity_text import TRACE_SPEED_KEY, outcome_sentence
from kvtune.study.spec import StudySpec
from kvtune.testing.virtual_bench import RecordingFakeLauncher, VirtualBench
from kvtune.workload import Workload

TRACE = Workload(
    trace="azure-conv",
    trace_requests=8,
    trace_length_scale=0.01,
    warmup_requests=1,
    concurrency=1,
    request_timeout_s=10,
)


def test_capacity_on_a_trace_is_the_fastest_replay_that_holds(make_tuner):
    launcher = RecordingFakeLauncher(
        base_ttft_ms=50,
        base_itl_ms=1,
        always={"ttft-per-active-ms": 100},
        knobs=(Knob("speed", "choices", choices=(1,)),),
    )
    spec = StudySpec(
        study="tcap", trials=1, workload=TRACE, objective="capacity", targets=["ttft_p95<400ms"], confirm_top=0
    ).validate()
    tuner, _ = make_tuner(spec, launcher, bench=VirtualBench(launcher))
    o = tuner.run()[0]
    assert o.feasible and o.objective == 14.0
    assert o.metrics["capacity"] == o.metrics[TRACE_SPEED_KEY] == 14.0
    assert o.metrics["p95_ttft_ms"] < 400 and o.metrics["capacity_rechecked"] == 1.0
    levels = [(lv["load"], lv["status"], lv["recheck"]) for lv in o.load_levels]
    # doubling from 1x to the first break (16x, re-checked), bisection 12 -> 14 -> 15, 14x re-checked
    assert levels == [
        (1.0, "held", False),
        (2.0, "held", False),
        (4.0, "held", False),
        (8.0, "held", False),
        (16.0, "broke", False),
        (16.0, "broke", True),
        (12.0, "held", False),
        (14.0, "held", False),
        (15.0, "broke", False),
        (14.0, "held", True),
    ]
    assert all(lv["unit"] == "x recorded rate" for lv in o.load_levels)
    said = outcome_sentence(o.confirmation, o.metrics)
    assert said is not None and said.startswith("holds this trace at 14x its recorded rate (")
    # every replay sent the same 8 requests of the trace, 14x faster at the speed found
    runs = json.loads((tuner.run_dir / "trials" / "0000" / "bench.json").read_text())["runs"]
    assert len(runs) == len(levels) and {len(r["samples"]) for r in runs} == {8}
    assert runs[-1]["workload"]["trace_speed"] == 14.0
