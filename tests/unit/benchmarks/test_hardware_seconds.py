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
