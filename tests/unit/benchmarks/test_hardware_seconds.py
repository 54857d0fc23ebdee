"""Hardware-seconds to a verified answer (benchmarks/hardware_seconds.py, search_efficiency.py
--hardware-seconds) on tiny synthetic landscapes with recorded requests: the replay screens with
the tuner's own rule (a losing config is cut and charged to the cut, judged on its short run), the
GPU-like scenario's cold and cached start-ups, auto_tune's grid, and the table's censoring."""

import math
import sys

import pytest

from tests.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import hardware_seconds as hs  # noqa: E402
import landscape  # noqa: E402
import replay_rules as rules  # noqa: E402
import search_efficiency as se  # noqa: E402

from kvtune.tuner.trial.screening import SCREENED  # noqa: E402


def _samples(gap_s: float, n: int = 8) -> list[dict]:
    """`n` requests of 16 tokens, one ending every `gap_s` s, each sent `gap_s` before it ended."""
    return [
        {"end_s": gap_s * (i + 1), "ok": True, "ttft_s": 0.1, "e2el_s": gap_s, "output_tokens": 16} for i in range(n)
    ]


def _measurement(tp: float, cost: float = 20.0) -> dict:
    gap = 16 / tp
    return {
        "metrics": {"output_throughput": tp, "p95_ttft_ms": 100.0, "error_rate": 0.0},
        "objective": tp,
        "cost_s": cost,
        "startup_s": 2.0,
        "measure_s": 8 * gap,
        "samples": _samples(gap),
    }


def write(path, backend: str = "llama-server", space: dict | None = None) -> landscape.Landscape:
    """a in {1..8}: throughput 4 x a tok/s (a=8 the best); the baseline 2 tok/s."""
    space = space or {"a": [1, 2, 4, 8]}
    name = next(iter(space))
    configs = [landscape.Config({}, [_measurement(2.0), _measurement(2.1)], baseline=True)]
    for v in space[name]:
        configs.append(landscape.Config({name: v}, [_measurement(4.0 * v), _measurement(4.1 * v)]))
    landscape.write(
        path,
        {
            "command": ["synthetic"],
            "hardware": {},
            "backend": backend,
            "workload": {"num_requests": 8},
            "targets": ["ttft_p95<1000ms", "error_rate<1%"],
            "objective": {"name": "output_throughput", "key": "output_throughput", "direction": "maximize"},
            "space": space,
            "informed_start": {},
            "recorded": "synthetic",
        },
        configs,
    )
    return landscape.load(path)


@pytest.fixture
def ls(tmp_path):
    return write(tmp_path / "screen.jsonl")


def test_a_config_far_behind_the_leader_is_cut_at_half_and_judged_on_its_short_run(ls):
    from kvtune.kinds import Direction
    from kvtune.tuner.trial.screening import Leader

    leader = Leader(32.0, "output_throughput", Direction.MAXIMIZE, 0.10)
    slow = ls.by_key[landscape.key({"a": 1})].measurements[0]  # 4 tok/s
    kind, at, short = rules.cut_of(ls, slow, [], leader, 0.5)
    assert kind == "screened" and at == pytest.approx(4 * 4.0) and short[SCREENED] == 1.0
    assert short["output_throughput"] == pytest.approx(4.0)
    close = ls.by_key[landscape.key({"a": 8})].measurements[0]
    assert rules.cut_of(ls, close, [], leader, 0.5) is None
    assert rules.cut_of(ls, slow, [], leader, 0.0) is None  # screening off


def test_the_screen_saves_search_time_and_names_the_same_config(ls):
    whole = se.replay(ls, "grid", seed=0, budget=5, informed=False)
    screened = se.replay(ls, "grid", seed=0, budget=5, informed=False, screen=0.5)
    assert whole.screened == 0 and screened.screened >= 1
    assert screened.hours < whole.hours and screened.gpu_hours < whole.gpu_hours
    assert screened.regret == whole.regret == 0.0


def test_the_gpu_scenario_charges_cold_and_cached_start_ups_by_compile_key(tmp_path):
    vllm = write(tmp_path / "v.jsonl", backend="vllm", space={"max-num-batched-tokens": [256, 2048]})
    done: set = set()
    assert se.gpu_launch_s(vllm, {"max-num-batched-tokens": 256}, False, done) == 60.0 + 20.0
    assert se.gpu_launch_s(vllm, {"max-num-batched-tokens": 256}, False, done) == 40.0 + 20.0
    assert se.gpu_launch_s(vllm, {"max-num-batched-tokens": 2048}, False, done, share=0.5) == 60.0 + 10.0
    llama = write(tmp_path / "l.jsonl")
    done = set()
    assert se.gpu_launch_s(llama, {"a": 1}, False, done) == 80.0
    assert se.gpu_launch_s(llama, {"a": 2}, False, done) == 80.0  # no compile cache: another config is cold
    assert se.gpu_launch_s(llama, {"a": 1}, False, done) == 60.0  # its own re-launch is cached


def test_auto_tune_measures_every_config_once_and_names_the_best_single_figure(ls):
    r = hs.autotune(ls, 0, 0, lambda p, b, done: 80.0)
    assert r.regret_at_fixed == 0.0 and r.budget == len(ls.configs)
    assert r.seconds["host"] == pytest.approx(20.0 * len(ls.configs))
    assert r.seconds["gpu"] == pytest.approx(80.0 * len(ls.configs))


def test_a_seed_that_never_got_there_is_censored_and_the_ratio_says_so():
    fast = [hs.SeedResult({"host": 100.0, "gpu": 200.0}, 5, 0.0)] * 3
    never = [hs.SeedResult({"host": math.inf, "gpu": math.inf}, math.inf, 1.0)] * 3
    text = hs.table({"kvtune": fast, hs.RANDOM: never}, 3, 20, "t")
    assert "| kvtune | host | 100 s [100 s, 100 s] | 0.00 [0.00, 0.00] |" in text
    assert "never" in text
    assert hs.bootstrap([1.0, 2.0, 3.0], [math.inf] * 3) == (0.0, 0.0)
    assert hs.bootstrap([math.inf] * 3, [1.0] * 3) == (math.inf, math.inf)


def test_main_prints_the_hardware_seconds_table_and_refuses_a_bad_ladder(ls, capsys):
    assert se.main([ls.path, "--hardware-seconds", "--seeds", "2", "--ladder", "3,5", "--fixed-budget", "3"]) == 0
    out = capsys.readouterr().out
    for name in [*hs.METHODS, hs.AUTOTUNE]:
        assert f"| {name} | host |" in out and f"| {name} | gpu |" in out
    assert se.main([ls.path, "--hardware-seconds", "--ladder", "3,x"]) == 2
    assert "--ladder" in capsys.readouterr().err


def test_the_bound_measures_the_optimum_first_and_its_verdict_is_most_of_its_bill(ls):
    """The perfect search names the optimum from a two-trial study; what it pays beyond two
    launches is the sentinel and the verdict, so its share is the proof's cost that no search
    can avoid, and the table's last line compares it with random search."""
    optimum = se.starts_of(ls, 0, hs.Start.OPTIMUM)
    assert optimum == [{"a": 8}]
    run = se.replay(ls, "tpe", seed=0, budget=2, informed=True, starts=optimum)
    assert run.regret == 0.0
    assert 0 < run.verdict_s < run.hours * 3600
    assert run.confirm_runs >= 1  # the sentinel at least
    results = se.hardware_seconds(ls, 3, [3, 5], fixed=3)
    bound = results[hs.BOUND]
    assert all(r.budget == 2 for r in bound)
    assert all(0.5 < r.verdict_share["host"] < 1.0 for r in bound)
    text = hs.table(results, 3, 3, "t")
    assert "The bound (a search that measures the optimum first, over random search): host " in text


def test_the_slot_ladder_tries_the_informed_start_at_every_slot_count_larger_ones_first(tmp_path):
    ls = write(tmp_path / "slots.jsonl", space={"parallel": [1, 2, 4, 8]})
    ls.header["informed_start"] = {"parallel": 2}
    ls.header["workload"] = {"num_requests": 8, "concurrency": 2}
    assert [s["parallel"] for s in rules.slot_ladder(ls, 0)] == [2, 4, 8, 1]
    assert se.starts_of(ls, 0, hs.Start.NONE) == [] and se.starts_of(ls, 0, hs.Start.INFORMED) is None


def test_first_within_gives_the_proofs_share_of_the_study_that_got_there():
    class R:
        def __init__(self, regret, hours, gpu_hours, verdict_s, verdict_gpu_s):
            self.regret, self.hours, self.gpu_hours = regret, hours, gpu_hours
            self.verdict_s, self.verdict_gpu_s = verdict_s, verdict_gpu_s

    by_budget = {5: [R(0.2, 0.1, 0.2, 100.0, 200.0)], 10: [R(0.0, 0.1, 0.2, 90.0, 360.0)]}
    assert hs.first_within(by_budget, 0, "host") == (pytest.approx(360.0), 10, pytest.approx(0.25))
    assert hs.first_within(by_budget, 0, "gpu") == (pytest.approx(720.0), 10, pytest.approx(0.5))
    never = hs.first_within({5: [R(0.2, 0.1, 0.2, 1.0, 1.0)]}, 0, "host")
    assert never[:2] == (math.inf, math.inf) and math.isnan(never[2])


def _two(v: float, spread: float) -> list[dict]:
    return [_measurement(v * (1 + spread)), _measurement(v * (1 - spread))]


def _settled_landscape(path, values: list[float], spread: float) -> landscape.Landscape:
    configs = [landscape.Config({}, _two(1.0, spread), baseline=True)]
    configs += [landscape.Config({"a": i}, _two(v, spread)) for i, v in enumerate(values)]
    landscape.write(
        path,
        {
            "command": ["synthetic"],
            "hardware": {},
            "backend": "llama-server",
            "workload": {"num_requests": 8},
            "targets": ["error_rate<1%"],
            "objective": {"name": "output_throughput", "key": "output_throughput", "direction": "maximize"},
            "space": {"a": list(range(len(values)))},
            "informed_start": {},
            "recorded": "synthetic",
        },
        configs,
    )
    return landscape.load(path)


def test_a_landscape_whose_best_leads_by_far_more_than_its_noise_is_settled(tmp_path):
    st = landscape.settled(_settled_landscape(tmp_path / "far.jsonl", [10.0, 20.0, 40.0], 0.02), draws=500)
    assert st.noise == pytest.approx(0.02 * 2**0.5, rel=0.05) and st.truth_se == pytest.approx(st.noise / 2**0.5)
    assert st.within_set == 1 and st.optimum_kept == 1.0 and st.within_kept == 1.0


def test_near_ties_under_noise_leave_the_recorded_optimum_a_draw(tmp_path):
    """Four configs within 3% of each other, measured with 15% noise: a second recording names
    another best most of the time, so "within 5% of the best" is a property of the draw."""
    st = landscape.settled(_settled_landscape(tmp_path / "ties.jsonl", [30.0, 29.5, 29.4, 29.1], 0.15), draws=2000)
    assert st.within_set == 4
    assert 0.2 < st.optimum_kept < 0.5
