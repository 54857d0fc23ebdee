"""The pure parts of benchmarks/traffic_matters.py: the two `kvtune run` commands, the named best
read from a results.json that kvtune's own writer built, the A B B A order of the
re-measurements, the paired ratio, the targets judged on the mean and the markdown table (the
real run needs llama-server and a quiet machine: the lead runs it)."""

from __future__ import annotations

import json
import math
import sys

import pytest

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import traffic_matters as tm  # noqa: E402

from kvtune.jsonsafe import dumps  # noqa: E402
from kvtune.knobs import Candidate  # noqa: E402
from kvtune.objectives.objective import objective  # noqa: E402
from kvtune.study.outcome import TrialOutcome  # noqa: E402
from kvtune.study.results import build_payload  # noqa: E402
from kvtune.study.spec import StudySpec  # noqa: E402
from kvtune.workload import Workload  # noqa: E402

TARGETS = ("ttft_p95<1.5x", "tpot_p95<2x")
BINARY = "/opt/llama-server"


def spec(multiturn: bool) -> StudySpec:
    w = Workload(concurrency=4, prompt_tokens=128, output_tokens=32, num_requests=16, warmup_requests=4)
    if multiturn:
        w = Workload(**{**w.to_dict(), "multiturn": True, "turns": 4, "think_time_s": 1.0})
    return StudySpec(study="s", targets=TARGETS, trials=6, workload=w, confirm_pairs=2).validate()


def metrics(tput: float, ttft: float = 100.0, tpot: float = 20.0, **more: float) -> dict:
    return {"output_throughput": tput, "p95_ttft_ms": ttft, "p95_tpot_ms": tpot, "error_rate": 0.0, **more}


def outcome(n: int, flags: dict, m: dict, baseline: bool = False, confirmation: dict | None = None) -> TrialOutcome:
    argv = [BINARY, "--model", "m.gguf", "--host", "127.0.0.1", "--port", str(40000 + n)]
    argv += [f"--{k}={v}" for k, v in flags.items()]
    return TrialOutcome(
        number=n,
        candidate=Candidate(flags=dict(flags)),
        argv=argv,
        env={},
        baseline=baseline,
        launched=True,
        metrics=m,
        constraints={"ttft_p95<1.5x": -0.1, "tpot_p95<2x": -0.1, "error_rate<1%": -1.0, "server_ran": -1.0},
        objective=m["output_throughput"],
        objectives=[m["output_throughput"]],
        confirmation=confirmation,
    )


def run(m: dict, valid: bool = True) -> dict:
    return {"metrics": m, "objective": m["output_throughput"], "objectives": [m["output_throughput"]],
            "feasible": True, "reason": "", "failure": None, "valid": valid}  # fmt: skip


def payload(multiturn: bool = True) -> dict:
    """results.json as kvtune writes it: a baseline re-measured twice (one run invalid), a
    config measured once, and a re-measured clear winner."""
    base_runs = [run(metrics(10.2, ttft=300.0)), run(metrics(99.0, ttft=900.0), valid=False)]
    best_runs = [run(metrics(19.8))]
    trials = [
        outcome(
            0,
            {},
            metrics(10.0, ttft=100.0),
            baseline=True,
            confirmation={"runs": base_runs, "objective": 10.2, "feasible": True, "metrics": base_runs[0]["metrics"]},
        ),  # fmt: skip
        outcome(1, {"parallel": 2}, metrics(11.0)),
        outcome(
            2,
            {"parallel": 4, "cache-reuse": 256},
            metrics(20.0),
            confirmation={"runs": best_runs, "objective": 19.8, "feasible": True, "metrics": best_runs[0]["metrics"]},
        ),  # fmt: skip
    ]
    s = spec(multiturn)
    p = build_payload("s", s.to_dict(), {"cpu": "x"}, "b1", list(TARGETS), [objective("output_throughput")], trials)
    return json.loads(dumps(p))  # as read back from the file: plain JSON


def test_the_two_studies_share_the_study_file_trials_and_seed_and_differ_in_the_workload(tmp_path) -> None:
    rnd = tm.tune_command("random", tmp_path / "random", 6, 0, tm.workload_flags("random", 4, "1s", None, None))
    mt = tm.tune_command("multiturn", tmp_path / "mt", 6, 0, tm.workload_flags("multiturn", 4, "1s", None, None))
    assert rnd[1:4] == ["-m", "kvtune.cli", "run"]
    for argv in (rnd, mt):
        assert argv[argv.index("--study-file") + 1] == str(tm.STUDY_FILE)
        assert argv[argv.index("--trials") + 1] == "6" and "seed=0" in argv
    assert rnd[rnd.index("--study") + 1] == "traffic-random" and mt[mt.index("--study") + 1] == "traffic-multiturn"
    assert "--workload" not in rnd
    assert mt[-6:] == ["--workload", "multiturn", "--set", "workload.turns=4", "--set", "workload.think_time_s=1s"]
    small = tm.workload_flags("random", 4, "1s", 8, 2)
    assert small == ["--set", "workload.num_requests=8", "--set", "workload.warmup_requests=2"]


def test_the_named_best_and_the_baseline_reference_come_from_results_json() -> None:
    p = payload()
    best = tm.read_best(p, "multiturn")
    assert best.trial.number == p["best_trial"] == 2
    assert best.flags == {"parallel": 4, "cache-reuse": 256}
    assert best.spec.workload.multiturn and best.spec.workload.turns == 4
    assert [t.text for t in best.targets] == [*TARGETS, "error_rate<1%"]
    # the baseline's first measurement and its valid re-measurement (the invalid one left out)
    assert best.baseline.metrics["output_throughput"] == pytest.approx(10.1)
    assert best.baseline.metrics["p95_ttft_ms"] == pytest.approx(200.0)
    assert best.why


def test_a_study_without_a_best_is_refused() -> None:
    p = payload()
    p["best_trial"] = None
    with pytest.raises(ValueError, match="named no best"):
        tm.read_best(p, "random")


def test_one_config_is_one_config_whatever_its_port() -> None:
    a, b = tm.read_best(payload(), "random"), tm.read_best(payload(False), "multiturn")
    assert tm.same_config(a, b)
    assert tm.argv_with_port(["x", "--port", "123", "--parallel", "4"]) == ["x", "--port", "PORT", "--parallel", "4"]


def test_the_schedule_is_a_b_b_a_with_the_workloads_swapped_every_other_round() -> None:
    order = tm.schedule(2)
    assert order == [
        (0, "random", "random"), (0, "multiturn", "random"), (0, "multiturn", "multiturn"), (0, "random", "multiturn"),
        (1, "random", "multiturn"), (1, "multiturn", "multiturn"), (1, "multiturn", "random"), (1, "random", "random"),
    ]  # fmt: skip
    for r in range(2):
        rnd = [(c, w) for k, c, w in order if k == r]
        assert [c for c, _ in rnd] == ["random", "multiturn", "multiturn", "random"]  # A B B A
        assert rnd[0][1] == rnd[1][1] and rnd[2][1] == rnd[3][1]  # each column's pair back to back
    # over two rounds each config goes first on each workload once
    firsts = {(order[i][2], order[i][1]) for i in range(0, 8, 2)}
    assert len(firsts) == 4
    assert len(tm.schedule(3)) == 12


def measured(own: float, other: float, rounds: int = 3, wobble: float = 0.02) -> list[tm.Measured]:
    """Own best `own` tok/s in its column, the other `other`, a little noise per round."""
    out = []
    for r, c, w in tm.schedule(rounds):
        tput = (own if c == w else other) * (1 + wobble * ((r % 3) - 1))
        m = metrics(tput, ttft=150.0, **({"median_ttft_ms_later": 80.0} if w == "multiturn" else {}))
        out.append(tm.Measured(r, c, w, m, feasible=True))
    return out


def test_the_ratio_is_the_columns_own_best_over_the_other_paired_by_round() -> None:
    ms = measured(own=20.0, other=16.0)
    for w in tm.WORKLOADS:
        iv = tm.own_vs_other(ms, w)
        assert iv is not None and iv.pairs == 3
        assert math.exp(iv.mean) == pytest.approx(20.0 / 16.0)
        assert iv.low > 0  # the noise pooled over the cells is ~2%: 25% is beyond it
    noise = tm.noise_of(ms)
    assert noise.dof == 8 and 0 < noise.rel_sd < 0.05
    # a failed side is a failure, not a ratio
    for m in ms:
        if m.config == "random" and m.workload == "multiturn":
            m.metrics = {}
    assert tm.own_vs_other(ms, "multiturn") is None


def test_targets_are_judged_on_the_mean_against_the_reference() -> None:
    best = tm.read_best(payload(), "multiturn")
    ref = best.baseline.metrics  # TTFT p95 200 ms: the target is 300 ms
    runs = [tm.Measured(r, "random", "multiturn", metrics(10.0, ttft=t)) for r, t in enumerate((250.0, 330.0))]
    assert tm.targets_on_mean(best.targets, ref, runs) == ""  # mean 290 ms holds though one run broke it
    runs.append(tm.Measured(2, "random", "multiturn", metrics(10.0, ttft=400.0)))
    assert tm.targets_on_mean(best.targets, ref, runs).startswith("ttft_p95 326.7 breaks ttft_p95<1.5x")
    runs.append(tm.Measured(3, "random", "multiturn", {}, reason="server failed to start"))
    assert tm.targets_on_mean(best.targets, ref, runs) == "1 run(s) failed: server failed to start"


def bests(same: bool = False) -> dict[str, tm.Best]:
    rnd = tm.read_best(payload(False), "random")
    mt = tm.read_best(payload(True), "multiturn")
    if not same:
        rnd = tm.Best("random", outcome(3, {"parallel": 1}, metrics(15.0)), rnd.spec, rnd.baseline, "tied within noise")
    return {"random": rnd, "multiturn": mt}


FACTS = {"host": "Some CPU, 2 CPUs", "load": "0.1 0.2 0.3 before, 2.0 1.0 0.5 after", "foreign_max": "0.05",
         "commands": ["python benchmarks/traffic_matters.py", "kvtune run --study traffic-random"]}  # fmt: skip


def test_the_table_has_both_configs_under_both_workloads_with_the_ratio_and_the_facts() -> None:
    b = bests()
    ms = measured(own=20.0, other=16.0)
    misses = {(c, w): "" for c in tm.WORKLOADS for w in tm.WORKLOADS}
    page = tm.render(FACTS, b, ms, misses)
    lines = page.splitlines()
    assert lines[0].startswith("**Answer.** Yes: under random prompts its own best is faster beyond the noise: +25.0%")
    head = next(i for i, line in enumerate(lines) if line.startswith("| output tok/s, mean ± SD over 3 rounds"))
    assert lines[head].endswith("| under random prompts | under multi-turn |")
    assert lines[head + 2].startswith("| best of random prompts (trial 3) | 20")
    assert lines[head + 3].startswith("| best of multi-turn (trial 2) | 16")
    assert "(targets met 3/3)" in lines[head + 2]
    assert lines[head + 4].startswith("| the column's own best / the other, paired, 95% | +25.0% [")
    assert lines[head + 5].startswith("| what these rounds could detect | smallest detectable +")
    assert "(80% power)" in lines[head + 5] and "15%" in lines[head + 5]
    # later-turn TTFT exists only under the conversations
    row = next(line for line in lines if line.startswith("| best of random prompts | random prompts |"))
    assert "| n/a |" in row and row.endswith("| met |")
    assert "| 80 ± 0 |" in next(line for line in lines if line.startswith("| best of random prompts | multi-turn |"))
    assert "- random prompts: ttft_p95<1.5x (= 300), tpot_p95<2x (= 40), error_rate<1% (= 0.01)" in lines
    assert "- best of random prompts: trial 3: `parallel=1` (tied within noise)" in lines
    assert "  `/opt/llama-server --model m.gguf --host 127.0.0.1 --port PORT --parallel=1`" in lines
    assert "Host: Some CPU, 2 CPUs. Load (1, 5, 15 min): 0.1 0.2 0.3 before, 2.0 1.0 0.5 after." in lines
    assert "kvtune run --study traffic-random" in lines


def test_a_missed_target_answers_even_within_the_noise_and_the_same_config_says_no() -> None:
    ms = measured(own=20.0, other=20.0)
    misses = {(c, w): "" for c in tm.WORKLOADS for w in tm.WORKLOADS}
    assert tm.verdict(ms, misses, same=False).startswith(
        "No measurable difference: under random prompts not detected: "
    )
    assert "smallest detectable +" in tm.verdict(ms, misses, same=False)
    misses[("random", "multiturn")] = "error_rate 0.5 breaks error_rate<1%"
    assert tm.verdict(ms, misses, same=False).startswith("Partly: ")
    assert "the best of random prompts misses the targets (error_rate 0.5" in tm.verdict(ms, misses, same=False)
    page = tm.render(FACTS, bests(same=True), ms, misses)
    assert page.startswith("**Answer.** No: both studies named the same config")


def test_a_study_without_a_best_says_so_and_names_a_busy_machine(tmp_path) -> None:
    p = payload()
    p.update(best_trial=None, named_best={"trial": None, "why": "no feasible config"}, disturbed=[{"trial": 0}] * 2)
    text = tm.no_best(p, "random", tmp_path / "random.log")
    assert text.startswith("the random study named no best (no feasible config; 2 of its measurements were disturbed")
    assert text.endswith(f"nothing to compare (see {tmp_path / 'random.log'})")
    p["disturbed"] = []
    assert "disturbed" not in tm.no_best(p, "random", tmp_path / "random.log")


def test_the_detectable_difference_shrinks_with_rounds_and_says_how_many_detect_15_percent() -> None:
    noisy = tm.PairedInterval(0.0, -0.2, 0.2, pairs=3, dof=2, source="3 pairs' own spread")
    smallest, rounds = tm.detectable(noisy)
    assert smallest > 0.15 and rounds > 3  # too few rounds: more are needed for 15%
    tight = tm.PairedInterval(0.0, -0.02, 0.02, pairs=20, dof=19, source="20 pairs' own spread")
    small, enough = tm.detectable(tight)
    assert small < 0.15 and enough <= 20
    assert "enough for 15%" in tm.power_text(tight) and "rounds would detect 15%" in tm.power_text(noisy)
