"""benchmarks/traffic_matters.py's re-measurement on the fake launcher: both bests measured under
both workloads (one of them multi-turn) through kvtune's trial runner, each on a fresh fake
server process, in the A B B A order of `schedule`, and judged against each workload's baseline
(the real run needs llama-server and a quiet machine: the lead runs it)."""

from __future__ import annotations

import sys
from dataclasses import replace

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import traffic_matters as tm  # noqa: E402

from kvtune.knobs import Candidate  # noqa: E402
from kvtune.study.outcome import TrialOutcome  # noqa: E402
from kvtune.study.spec import StudySpec  # noqa: E402
from kvtune.testing.fake_launcher import FakeLauncher  # noqa: E402
from kvtune.tuner.trial.context import Placement, Subject  # noqa: E402
from kvtune.tuner.trial.disturbance import unwatched  # noqa: E402
from kvtune.tuner.trial.memory_wait import MemorySnapshot, MemoryWait  # noqa: E402
from kvtune.tuner.trial.runner import TrialRunner  # noqa: E402
from kvtune.workload import Workload  # noqa: E402

WL = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1, request_timeout_s=10)
SPEED = {"random": 4, "multiturn": 1}  # two configs: fake servers of TTFT 50 and 200 ms


def best(kind: str, spec: StudySpec) -> tm.Best:
    candidate = Candidate(flags={"speed": SPEED[kind]})
    trial = TrialOutcome(number=SPEED[kind], candidate=candidate, argv=FakeLauncher().command(candidate, 1), env={})
    # generous: a loaded machine must not make the fake servers miss (timing is not under test)
    reference = {"p95_ttft_ms": 20000.0, "p95_tpot_ms": 2000.0, "output_throughput": 10.0}
    base = TrialOutcome(number=0, candidate=Candidate(), argv=[], env={}, baseline=True, metrics=reference)
    return tm.Best(kind, trial, spec, base, "test")


def test_both_bests_are_measured_under_both_workloads_in_the_schedules_order(tmp_path, capsys) -> None:
    specs = {
        "random": StudySpec(study="r", workload=WL, targets=["ttft_p95<1.5x"], startup_timeout_s=20),
        "multiturn": StudySpec(
            study="m", workload=replace(WL, multiturn=True, turns=2), targets=["ttft_p95<1.5x"], startup_timeout_s=20
        ),
    }
    bests = {k: best(k, s.validate()) for k, s in specs.items()}
    runners = {}
    for w, b in bests.items():
        runner = TrialRunner(
            Subject(b.spec, FakeLauncher(), b.targets, monitor=unwatched), Placement.here(), tmp_path / "pid"
        )
        runner.memory_wait = MemoryWait(read=lambda: MemorySnapshot(64 * 2**30), sleep=lambda s: None)
        runners[w] = runner
    ms = tm.remeasure(bests, 2, tmp_path, runners)
    assert [(m.round, m.config, m.workload) for m in ms] == tm.schedule(2)
    bad = [(m.config, m.workload, m.reason) for m in ms if not (m.feasible and (tm.value(m, tm.OBJECTIVE) or 0) > 0)]
    assert not bad and not any(m.disturbed for m in ms)
    assert all("median_ttft_ms_later" in m.metrics for m in ms if m.workload == "multiturn")
    assert not any("median_ttft_ms_later" in m.metrics for m in ms if m.workload == "random")
    assert (tmp_path / "remeasure" / "r1-multiturn-on-random" / "bench.json").is_file()
    assert all(tm.own_vs_other(ms, w).pairs == 2 for w in tm.WORKLOADS)  # paired by round
    misses = {(c, w): tm.targets_on_mean(bests[w].targets, bests[w].baseline.metrics, tm.cell(ms, c, w)) for c in tm.WORKLOADS for w in tm.WORKLOADS}  # fmt: skip
    assert misses == {k: "" for k in misses}  # TTFT 50-200 ms, far under 1.5x the reference
    assert "round 2/2: best of random prompts under multi-turn" in capsys.readouterr().out
