"""The replay benchmark (benchmarks/search_efficiency.py) on a tiny synthetic landscape: the
truth of a landscape, deterministic replays, the grid finds the optimum, bad files exit 2."""

import json
import random
import sys
from pathlib import Path

import pytest

from tests.paths import BENCHMARKS

BENCH = BENCHMARKS
sys.path.insert(0, str(BENCH))

import landscape  # noqa: E402
import search_efficiency as se  # noqa: E402

SPACE = {"a": [1, 2, 4, 8], "b": ["x", "y"]}


def measurement(tp: float, ttft_ms: float, cost: float = 20.0) -> dict:
    return {"metrics": {"output_throughput": tp, "p95_ttft_ms": ttft_ms, "error_rate": 0.0},
            "objective": tp, "cost_s": cost}


def write_landscape(path: Path, seed: int = 1) -> Path:
    """Throughput grows with a (x1.5 for b=y); TTFT grows with a, so a=8 breaks ttft<1s:
    the optimum is a=4, b=y (about 6 tok/s)."""
    rng = random.Random(seed)
    configs = [landscape.Config({}, [measurement(1.0, 500.0, 30.0), measurement(1.1, 520.0, 30.0)], baseline=True)]
    for a in SPACE["a"]:
        for b in SPACE["b"]:
            ms = [measurement(a * (1.5 if b == "y" else 1.0) * rng.uniform(0.97, 1.03),
                              200.0 * a * rng.uniform(0.95, 1.05), 10.0 + a) for _ in range(2)]
            configs.append(landscape.Config({"a": a, "b": b}, ms))
    landscape.write(path, {"command": ["synthetic"], "hardware": {}, "workload": {},
                           "targets": ["ttft_p95<1000ms", "error_rate<1%"],
                           "objective": {"name": "output_throughput", "key": "output_throughput",
                                         "direction": "maximize"},
                           "space": SPACE, "informed_start": {"a": 2}, "recorded": "synthetic"}, configs)
    return path


@pytest.fixture
def ls(tmp_path):
    return landscape.load(write_landscape(tmp_path / "tiny.jsonl"))


def test_truth_mean_objective_and_feasibility_on_the_mean(ls, tmp_path):
    best = ls.optimum()
    assert best.params == {"a": 4, "b": "y"}
    assert ls.regret(best) == 0.0
    assert not ls.by_key[landscape.key({"a": 8, "b": "y"})].truly_feasible  # TTFT 1.6 s
    worse = ls.by_key[landscape.key({"a": 2, "b": "y"})]
    assert ls.regret(worse) == pytest.approx(1 - worse.true_objective / best.true_objective)
    assert ls.regret(None) == 1.0
    # one measurement over the target, the mean under it: truly feasible
    c = landscape.Config({"a": 1, "b": "x"}, [measurement(1.0, 1100.0), measurement(1.0, 700.0)])
    landscape.truth(c, ls.targets)
    assert c.truly_feasible


def test_replay_is_deterministic_for_a_seed(ls):
    one = se.benchmark(ls, ["tpe", "random"], [5, 8], seeds=3, base_seed=4)
    two = se.benchmark(ls, ["tpe", "random"], [5, 8], seeds=3, base_seed=4)
    assert [(r.sampler, r.budget, r.regret, r.hours, r.path) for r in one] == \
           [(r.sampler, r.budget, r.regret, r.hours, r.path) for r in two]
    assert se.markdown(ls, one, 3, "cmd") == se.markdown(ls, two, 3, "cmd")


def test_budget_counts_measured_configs_and_time_is_the_recorded_cost(ls):
    run = se.replay(ls, "random", seed=0, budget=6, informed=True)
    assert [n for n, _, _ in run.path] == [1, 2, 3, 4, 5, 6]
    assert run.path[0][1] == pytest.approx(30.0 / 3600)  # the baseline's recorded cost
    assert run.hours >= run.path[-1][1]  # + the confirmation's re-measurements


def test_the_grid_with_the_whole_space_finds_the_optimum(ls):
    for seed in range(3):
        run = se.replay(ls, "grid", seed=seed, budget=9, informed=False)  # baseline + 8 configs
        assert run.regret == 0.0 and run.named_feasible
        assert run.reached(0.0) is not None


def test_the_table_has_a_row_per_sampler_and_budget_and_a_headline(ls):
    runs = se.benchmark(ls, ["tpe", "random"], [4, 6], seeds=2)
    md = se.markdown(ls, runs, 2, "cmd")
    # 2 budgets + the reach row + the early-stop row
    assert md.count("| tpe | on |") == 4 and md.count("| random | off |") == 4
    assert "random" in se.headline(runs, "tpe")


def test_main_writes_the_table_and_the_plot(ls, tmp_path, capsys):
    md, png = tmp_path / "t.md", tmp_path / "p.png"
    rc = se.main([ls.path, "--seeds", "2", "--budgets", "4,6", "--samplers", "tpe,random",
                  "--md", str(md), "--png", str(png)])
    assert rc == 0 and "| tpe |" in md.read_text() and png.stat().st_size > 1000


@pytest.mark.parametrize("content,fragment", [
    (None, "does not exist"),
    ("not json\n", "line 1 is not JSON"),
    ('{"kind": "config"}\n', "first line must be the header"),
    ("HEADER\n" + '{"kind": "config", "params": {"a": 1}, "measurements": []}\n', "needs params"),
    ("HEADER\n" + '{"kind": "config", "params": {"a": 1}, "measurements": [{"metrics": null, "cost_s": 1}]}\n',
     "are not the space's knobs"),
    ("HEADER\n", "no configs"),
])
def test_a_bad_landscape_file_is_one_line_exit_2(tmp_path, capsys, content, fragment):
    header = json.dumps({"kind": "header", "format": landscape.FORMAT, "command": [], "hardware": {},
                         "workload": {}, "targets": ["ttft<1s"], "recorded": "",
                         "objective": {"key": "output_throughput", "direction": "maximize"}, "space": SPACE})
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content.replace("HEADER", header))
    rc = se.main([str(path), "--seeds", "1", "--budgets", "3", "--samplers", "random"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and fragment in err[0], err


def test_an_unknown_sampler_exits_2(ls, capsys):
    assert se.main([ls.path, "--samplers", "nosuch"]) == 2
    assert "unknown sampler" in capsys.readouterr().err


def test_the_headline_says_no_when_the_default_never_gets_there(ls):
    runs = se.benchmark(ls, ["tpe", "random"], [2], seeds=2)  # baseline + informed start only
    assert "(no:" in se.headline(runs, "tpe")


def samples(ttfts: list[float], step: float = 1.0) -> list[dict]:
    """Requests that end one every `step` seconds, with these TTFTs."""
    return [{"end_s": step * (i + 1), "ok": True, "ttft_s": t, "e2el_s": t + 0.5, "output_tokens": 8}
            for i, t in enumerate(ttfts)]


def write_stoppable(path: Path) -> Path:
    """Four requests planned, ttft_p95<1000ms: a=2 breaks it with its first two requests (the
    p95 of four can then no longer hold), a=1 never does."""
    fast = {**measurement(1.0, 300.0, 20.0), "measure_s": 4.0, "feasible": True,
            "samples": samples([0.3, 0.3, 0.3, 0.3])}
    slow = {**measurement(2.0, 2000.0, 20.0), "measure_s": 4.0, "feasible": False,
            "samples": samples([2.0, 2.0, 2.0, 2.0])}
    configs = [landscape.Config({}, [dict(fast)], baseline=True),
               landscape.Config({"a": 1}, [dict(fast), dict(fast)]),
               landscape.Config({"a": 2}, [dict(slow), dict(slow)])]
    landscape.write(path, {"command": ["synthetic"], "hardware": {}, "workload": {"num_requests": 4},
                           "targets": ["ttft_p95<1000ms", "error_rate<1%"],
                           "objective": {"name": "output_throughput", "key": "output_throughput",
                                         "direction": "maximize"},
                           "space": {"a": [1, 2]}, "informed_start": {}, "recorded": "synthetic"}, configs)
    return path


def test_early_stop_charges_a_lost_trial_only_until_the_rule_fires(tmp_path):
    ls = landscape.load(write_stoppable(tmp_path / "stop.jsonl"))
    slow = ls.by_key[landscape.key({"a": 2})].measurements[0]
    fast = ls.by_key[landscape.key({"a": 1})].measurements[0]
    # p95 over 4 planned: one request over 1 s leaves 3 at best-case 0 and p95 still breaks
    assert se.stop_at(ls, slow, baseline=False) == 1.0
    assert se.stop_at(ls, fast, baseline=False) is None
    run = se.replay(ls, "grid", seed=0, budget=3, informed=False)
    assert run.stopped == 1
    # the stopped trial cost 20 - 4 + 1 = 17 s instead of 20 s; the others ran whole
    assert run.infeasible_no_stop_s == pytest.approx(20.0)
    assert run.infeasible_s == pytest.approx(17.0)
    assert run.hours_no_stop - run.hours == pytest.approx(3.0 / 3600)
    assert "Early stop" in se.markdown(ls, [run], 1, "cmd")


def test_relative_targets_are_resolved_against_the_baseline_mean(tmp_path):
    path = write_landscape(tmp_path / "rel.jsonl")
    ls = landscape.load(path).with_targets(["ttft_p95<2x"])  # baseline TTFT p95 mean: 510 ms
    assert ls.targets[0].threshold == pytest.approx(1020.0)
    assert ls.has_relative_targets
    assert not ls.by_key[landscape.key({"a": 8, "b": "y"})].truly_feasible  # ~1600 ms
    assert ls.by_key[landscape.key({"a": 4, "b": "y"})].truly_feasible  # ~800 ms
    base = next(c for c in ls.configs if c.baseline)
    assert se.stop_at(ls, dict(base.measurements[0], samples=samples([5.0] * 4)), baseline=True) is None
