"""The replay benchmark (benchmarks/search_efficiency.py) on a tiny synthetic landscape: the
truth of a landscape, deterministic replays, the grid finds the optimum, bad files exit 2, and
the replay keeps kvtune's rules (replay_rules.py): re-measurements drawn without replacement,
relative targets from the baseline's first measurement, one informed start per seed, and a
headline that does not count a censored figure as meeting the goal."""

import json
import math
import random
import sys
from pathlib import Path

import pytest

from tests.paths import BENCHMARKS

BENCH = BENCHMARKS
sys.path.insert(0, str(BENCH))

import efficiency_report as report  # noqa: E402
import landscape  # noqa: E402
import replay_rules as rules  # noqa: E402
import search_efficiency as se  # noqa: E402

from kvtune.tuner.trial.stopping import watched_targets  # noqa: E402

SPACE = {"a": [1, 2, 4, 8], "b": ["x", "y"]}


def measurement(tp: float, ttft_ms: float, cost: float = 20.0) -> dict:
    return {
        "metrics": {"output_throughput": tp, "p95_ttft_ms": ttft_ms, "error_rate": 0.0},
        "objective": tp,
        "cost_s": cost,
    }


def write_landscape(path: Path, seed: int = 1) -> Path:
    """Throughput grows with a (x1.5 for b=y); TTFT grows with a, so a=8 breaks ttft<1s:
    the optimum is a=4, b=y (about 6 tok/s)."""
    rng = random.Random(seed)
    configs = [landscape.Config({}, [measurement(1.0, 500.0, 30.0), measurement(1.1, 520.0, 30.0)], baseline=True)]
    for a in SPACE["a"]:
        for b in SPACE["b"]:
            ms = [
                measurement(
                    a * (1.5 if b == "y" else 1.0) * rng.uniform(0.97, 1.03),
                    200.0 * a * rng.uniform(0.95, 1.05),
                    10.0 + a,
                )
                for _ in range(2)
            ]
            configs.append(landscape.Config({"a": a, "b": b}, ms))
    landscape.write(
        path,
        {
            "command": ["synthetic"],
            "hardware": {},
            "workload": {},
            "targets": ["ttft_p95<1000ms", "error_rate<1%"],
            "objective": {"name": "output_throughput", "key": "output_throughput", "direction": "maximize"},
            "space": SPACE,
            "informed_start": {"a": 2},
            "recorded": "synthetic",
        },
        configs,
    )
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
    assert [(r.sampler, r.budget, r.regret, r.hours, r.path) for r in one] == [
        (r.sampler, r.budget, r.regret, r.hours, r.path) for r in two
    ]
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
    rc = se.main(
        [ls.path, "--seeds", "2", "--budgets", "4,6", "--samplers", "tpe,random", "--md", str(md), "--png", str(png)]
    )
    assert rc == 0 and "| tpe |" in md.read_text() and png.stat().st_size > 1000


@pytest.mark.parametrize(
    "content,fragment",
    [
        (None, "does not exist"),
        ("not json\n", "line 1 is not JSON"),
        ('{"kind": "config"}\n', "first line must be the header"),
        ("HEADER\n" + '{"kind": "config", "params": {"a": 1}, "measurements": []}\n', "needs params"),
        (
            "HEADER\n" + '{"kind": "config", "params": {"a": 1}, "measurements": [{"metrics": null, "cost_s": 1}]}\n',
            "are not the space's knobs",
        ),
        ("HEADER\n", "no configs"),
    ],
)
def test_a_bad_landscape_file_is_one_line_exit_2(tmp_path, capsys, content, fragment):
    header = json.dumps(
        {
            "kind": "header",
            "format": landscape.FORMAT,
            "command": [],
            "hardware": {},
            "workload": {},
            "targets": ["ttft<1s"],
            "recorded": "",
            "objective": {"key": "output_throughput", "direction": "maximize"},
            "space": SPACE,
        }
    )
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content.replace("HEADER", header))
    rc = se.main([str(path), "--seeds", "1", "--budgets", "3", "--samplers", "random"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and fragment in err[0], err


def test_an_unknown_sampler_exits_2(ls, capsys):
    assert se.main([ls.path, "--samplers", "nosuch"]) == 2
    assert "unknown sampler" in capsys.readouterr().err


def samples(ttfts: list[float], step: float = 1.0) -> list[dict]:
    """Requests that end one every `step` seconds, with these TTFTs."""
    return [
        {"end_s": step * (i + 1), "ok": True, "ttft_s": t, "e2el_s": t + 0.5, "output_tokens": 8}
        for i, t in enumerate(ttfts)
    ]


def write_stoppable(path: Path) -> Path:
    """Four requests planned, ttft_p95<1000ms: a=2 breaks it with its first two requests (the
    p95 of four can then no longer hold), a=1 never does."""
    fast = {
        **measurement(1.0, 300.0, 20.0),
        "measure_s": 4.0,
        "feasible": True,
        "samples": samples([0.3, 0.3, 0.3, 0.3]),
    }
    slow = {
        **measurement(2.0, 2000.0, 20.0),
        "measure_s": 4.0,
        "feasible": False,
        "samples": samples([2.0, 2.0, 2.0, 2.0]),
    }
    configs = [
        landscape.Config({}, [dict(fast)], baseline=True),
        landscape.Config({"a": 1}, [dict(fast), dict(fast)]),
        landscape.Config({"a": 2}, [dict(slow), dict(slow)]),
    ]
    landscape.write(
        path,
        {
            "command": ["synthetic"],
            "hardware": {},
            "workload": {"num_requests": 4},
            "targets": ["ttft_p95<1000ms", "error_rate<1%"],
            "objective": {"name": "output_throughput", "key": "output_throughput", "direction": "maximize"},
            "space": {"a": [1, 2]},
            "informed_start": {},
            "recorded": "synthetic",
        },
        configs,
    )
    return path


def test_early_stop_charges_a_lost_trial_only_until_the_rule_fires(tmp_path):
    ls = landscape.load(write_stoppable(tmp_path / "stop.jsonl"))
    slow = ls.by_key[landscape.key({"a": 2})].measurements[0]
    fast = ls.by_key[landscape.key({"a": 1})].measurements[0]
    # p95 over 4 planned: one request over 1 s leaves 3 at best-case 0 and p95 still breaks
    assert se.stop_at(ls, slow, ls.declared) == 1.0
    assert se.stop_at(ls, fast, ls.declared) is None
    run = se.replay(ls, "grid", seed=0, budget=3, informed=False)
    assert run.stopped == 1
    # the stopped trial cost 20 - 4 + 1 = 17 s instead of 20 s; the others ran whole
    assert run.infeasible_no_stop_s == pytest.approx(20.0)
    assert run.infeasible_s == pytest.approx(17.0)
    assert run.hours_no_stop - run.hours == pytest.approx(3.0 / 3600)
    assert "Early stop" in se.markdown(ls, [run], 1, "cmd")


def test_the_truth_resolves_relative_targets_against_the_baseline_mean(tmp_path):
    path = write_landscape(tmp_path / "rel.jsonl")
    ls = landscape.load(path).with_targets(["ttft_p95<2x"])  # baseline TTFT p95 mean: 510 ms
    assert ls.targets[0].threshold == pytest.approx(1020.0)
    assert ls.has_relative_targets
    assert not ls.by_key[landscape.key({"a": 8, "b": "y"})].truly_feasible  # ~1600 ms
    assert ls.by_key[landscape.key({"a": 4, "b": "y"})].truly_feasible  # ~800 ms
    # the baseline is never watched by the early stop (kvtune measures it whole)
    base = next(c for c in ls.configs if c.baseline)
    watched = watched_targets(ls.declared, True, base.measurements[0]["metrics"])
    assert watched == [] and se.stop_at(ls, dict(base.measurements[0], samples=samples([5.0] * 4)), watched) is None


# ---- kvtune's rules in the replay ---------------------------------------------------------------


def test_a_re_measurement_is_never_the_recorded_measurement_drawn_first(ls):
    """Every config has two distinct recorded measurements: a confirmed config's first
    re-measurement must be the other one (a fresh launch), for every seed and sampler."""
    confirmed = 0
    for sampler in ("tpe", "random", "grid"):
        for seed in range(4):
            rp = se.Replay(ls, sampler, seed, budget=6, informed=sampler != "grid", base_seed=0)
            rp.run()
            for o in rp.outcomes:
                runs = (o.confirmation or {}).get("runs") or []
                if not runs:
                    continue
                confirmed += 1
                recorded = sorted(m["objective"] for m in rp.configs[o.number].measurements)
                assert runs[0]["objective"] != o.objective
                assert sorted([o.objective, runs[0]["objective"]]) == pytest.approx(recorded)
    assert confirmed >= 12  # the baseline's end sentinel, at least, in each of the 12 runs


def test_the_verdict_names_the_best_of_a_replay_as_the_tuner_does(ls):
    """The replay drives verdict.next_step as tuner/confirmation.py does: the end sentinel, then the
    runs it asks for; the verdict is attached to the trials it compared and names the best."""
    rp = se.Replay(ls, "tpe", 0, budget=6, informed=True, base_seed=0)
    run = rp.run()
    base = next(o for o in rp.outcomes if o.baseline)
    assert base.verdict is not None and base.confirmation["runs"][0]["role"] == "sentinel"
    named = se.named_best(rp.outcomes, rp._direction())
    assert named is not None and named.number == base.verdict["named"]
    assert run.confirm_runs == sum(len((o.confirmation or {}).get("runs") or []) for o in rp.outcomes)


def write_relative(path: Path) -> Path:
    """The baseline measured at 500 ms and at 1000 ms TTFT; config a=1 at 900 ms. Under
    ttft_p95<1.5x it holds against the second baseline measurement (1500 ms) and the mean
    (1125 ms), not against the first (750 ms)."""
    configs = [
        landscape.Config({}, [measurement(1.0, 500.0), measurement(1.0, 1000.0)], baseline=True),
        landscape.Config({"a": 1}, [measurement(2.0, 900.0), measurement(2.0, 900.0)]),
        landscape.Config({"a": 2}, [measurement(1.5, 300.0), measurement(1.5, 300.0)]),
    ]
    landscape.write(
        path,
        {
            "command": ["synthetic"],
            "hardware": {},
            "workload": {},
            "targets": ["ttft_p95<1.5x"],
            "objective": {"name": "output_throughput", "key": "output_throughput", "direction": "maximize"},
            "space": {"a": [1, 2]},
            "informed_start": {},
            "recorded": "synthetic",
        },
        configs,
    )
    return path


def test_relative_targets_are_resolved_from_the_baselines_first_measurement_in_the_study(tmp_path):
    ls = landscape.load(write_relative(tmp_path / "rel.jsonl"))
    one = ls.by_key[landscape.key({"a": 1})]
    assert one.truly_feasible  # the truth: against the baseline's mean, 1125 ms
    firsts = set()
    for seed in range(8):
        rp = se.Replay(ls, "grid", seed, budget=3, informed=False, base_seed=0)
        rp.run()
        base_ttft = rp.base.metrics["p95_ttft_ms"]
        firsts.add(base_ttft)
        assert rp.base is next(o for o in rp.outcomes if o.baseline)
        measured = next(o for o in rp.outcomes if o.candidate.flags == {"a": 1})
        # judged as kvtune judges it: 1.5 x the baseline's first measurement in this study
        assert measured.feasible is (1.5 * base_ttft > 900.0)
        # the baseline's re-measurement (its end sentinel) is scored against its first measurement too
        again = rp.base.confirmation["runs"][0]
        assert again["feasible"] is (again["metrics"]["p95_ttft_ms"] < 1.5 * base_ttft)
    assert firsts == {500.0, 1000.0}  # both orders drawn over the seeds


def write_partial_guess(path: Path, backend: str | None) -> Path:
    """A recorded informed start that lacks a knob (threads, as the llama-server recording's does)."""
    configs = [landscape.Config({}, [measurement(1.0, 500.0)], baseline=True)]
    for t in (1, 2):
        for p in (1, 2, 4):
            configs.append(
                landscape.Config(
                    {"threads": t, "parallel": p}, [measurement(t * p, 300.0), measurement(t * p * 1.1, 310.0)]
                )
            )
    header = {
        "command": ["synthetic"],
        "hardware": {},
        "workload": {"concurrency": 4},
        "targets": ["error_rate<1%"],
        "objective": {"name": "output_throughput", "key": "output_throughput", "direction": "maximize"},
        "space": {"threads": [1, 2], "parallel": [1, 2, 4]},
        "informed_start": {"parallel": 4},
        "recorded": "synthetic",
    }
    if backend:
        header["backend"] = backend
    landscape.write(path, header, configs)
    return path


def test_the_informed_start_takes_kvtunes_rule_for_a_knob_the_recording_left_out(tmp_path):
    ls = landscape.load(write_partial_guess(tmp_path / "g.jsonl", "llama-server"))
    # llama-server's rule: threads = every core, the top of the range {1, 2} spans
    assert rules.informed_start(ls, 0) == {"parallel": 4, "threads": 2}
    real = landscape.load(BENCHMARKS / "landscapes" / "llama-server-demo.jsonl")
    assert "threads" not in real.header["informed_start"] and rules.informed_start(real, 7)["threads"] == 2


def test_the_informed_start_is_the_same_config_for_every_sampler_in_a_seed(tmp_path):
    ls = landscape.load(write_partial_guess(tmp_path / "g.jsonl", None))  # no backend: no rule
    for seed in range(4):
        starts = []
        for sampler in ("tpe", "random", "qmc"):
            rp = se.Replay(ls, sampler, seed, budget=4, informed=True, base_seed=0)
            rp.run()
            assert rp.outcomes[0].baseline
            starts.append(rp.outcomes[1].candidate.flags)
        assert starts[0]["parallel"] == 4 and starts[0]["threads"] in (1, 2)
        assert all(s == starts[0] for s in starts), starts
    assert {rules.informed_start(ls, s)["threads"] for s in range(16)} == {1, 2}  # drawn per seed


def test_the_name_is_kvtunes_naming_of_the_replayed_outcomes(ls):
    """The replay's named best is exactly what study/naming.py names for the same outcomes."""
    from kvtune.study.naming import name_best

    for seed in range(3):
        rp = se.Replay(ls, "tpe", seed, budget=6, informed=True, base_seed=0)
        run = rp.run()
        expected = name_best(rp.outcomes, rp._direction()).best
        assert expected is not None and rules.named_best(rp.outcomes, rp._direction()) is expected
        assert run.regret == ls.regret(rp.configs[expected.number])


# ---- the headline: a censored figure decides only through its bound ----------------------------


def fake_run(sampler: str, budget: int, reach_at: int | None, informed: bool = True) -> se.Run:
    """A run whose search first measures a config within 5% at trial `reach_at` (None: never)."""
    path = [(n, n / 100, 0.0 if reach_at is not None and n >= reach_at else 0.5) for n in range(1, budget + 1)]
    return se.Run(sampler, 0, budget, informed, 0.0, True, budget / 100, path=path)


@pytest.mark.parametrize(
    "d,bd,r,br,met",
    [
        (10, 40, 30, 40, True),  # both measured: 10 <= 30/3
        (11, 40, 30, 40, False),  # both measured: 11 > 10
        (24, 40, math.inf, 40, None),  # random censored at 40: ratio < 0.6 only
        (24, 40, math.inf, 72, True),  # random censored at 72: ratio < 1/3
        (math.inf, 40, 150, 160, None),  # default censored at 40, random 150: ratio > 0.27 only
        (math.inf, 40, 90, 120, False),  # default censored at 40, random 90: ratio > 0.44
        (math.inf, 40, math.inf, 120, None),  # both censored
    ],
)
def test_goal_met_decides_only_what_the_bounds_show(d, bd, r, br, met):
    assert report.goal_met(d, bd, r, br) is met


def test_the_headline_says_not_shown_for_a_default_measured_against_a_censored_random():
    """The issue's case: tpe 24 vs random >40 at a budget of 40 shows a ratio below 0.6, no more."""
    runs = [fake_run("tpe", 40, 24) for _ in range(3)] + [fake_run("random", 40, None) for _ in range(3)]
    text = se.headline(runs, "tpe")
    assert "tpe 24 vs random >40" in text and "ratio < 0.60" in text and "not shown" in text
    assert "yes" not in text and "at least 72" in text


def test_the_headline_uses_randoms_reference_budget_and_says_yes_or_no_when_measured():
    base = [fake_run("tpe", 40, 24) for _ in range(3)] + [fake_run("random", 40, None) for _ in range(3)]
    yes = se.headline(base + [fake_run("random", 120, 80) for _ in range(3)], "tpe")
    assert "tpe 24 vs random 80" in yes and "ratio 0.30; yes" in yes
    no = se.headline(base + [fake_run("random", 120, 60) for _ in range(3)], "tpe")
    assert "tpe 24 vs random 60" in no and "ratio 0.40; no" in no
    # random censored even at 120: 24 <= 120/3, so the goal is shown to hold
    bound = se.headline(base + [fake_run("random", 120, None) for _ in range(3)], "tpe")
    assert "random >120" in bound and "ratio < 0.20; yes" in bound


def test_the_headline_never_counts_a_censored_default_as_meeting_the_goal():
    runs = [fake_run("tpe", 40, None)] + [fake_run("random", 160, 150)]
    text = se.headline(runs, "tpe")
    assert "tpe >40 vs random 150" in text and "ratio > 0.27; not shown" in text and "yes" not in text
    runs = [fake_run("tpe", 40, None)] + [fake_run("random", 120, 90)]
    assert "ratio > 0.44; no" in se.headline(runs, "tpe")


def test_on_the_tiny_landscape_random_runs_at_the_reference_budget(ls):
    """At budget 3 both searches rarely get within 5%; random's reference runs over the whole
    space (9 configs) always do, so its figure in the headline is measured, not censored."""
    short = se.benchmark(ls, ["tpe", "random"], [3], seeds=3)
    for part in se.headline(short, "tpe").split("; informed"):
        if part.count(">3") == 2:
            assert "not shown" in part
    runs = se.benchmark(ls, ["tpe", "random"], [3], seeds=3, reference=se.reference_budget(ls, [3]))
    assert se.reference_budget(ls, [3]) == 9  # 3 x 3, the landscape's size
    assert {r.budget for r in runs if r.sampler == "random"} == {3, 9}
    assert {r.budget for r in runs if r.sampler == "tpe"} == {3}
    text = se.headline(runs, "tpe")
    assert "random >9" not in text and "vs random " in text
    md = se.markdown(ls, runs, 3, "cmd")
    assert "| random | on | 9 |" in md and "Early stop (budget 3 runs" in md


def test_main_runs_random_at_the_reference_budget_and_refuses_a_bad_one(ls, tmp_path, capsys):
    md = tmp_path / "t.md"
    rc = se.main(
        [
            ls.path,
            "--seeds",
            "2",
            "--budgets",
            "3",
            "--samplers",
            "tpe,random",
            "--reference-budget",
            "8",
            "--md",
            str(md),
        ]
    )
    assert rc == 0 and "| random | on | 8 |" in md.read_text() and "| tpe | on | 8 |" not in md.read_text()
    assert "Headline: informed start on: tpe" in md.read_text()
    capsys.readouterr()
    assert se.main([ls.path, "--reference-budget", "0"]) == 2
    assert "--reference-budget" in capsys.readouterr().err
