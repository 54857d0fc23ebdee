"""The run summary's lines that read the trials: start-up seconds of the best and the baseline,
the verdict, and the best command line with its environment."""

from __future__ import annotations

import io
import json
import shlex

from rich.console import Console

from kvtune.artifacts import launch_script
from kvtune.artifacts.summary import summarize
from kvtune.cli.run_text import print_summary
from kvtune.knobs import Knob
from kvtune.study.results import StudyResults, choose_best
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import prepare
from kvtune.workload import Workload

WL = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1)


def chosen(payload: dict, outcomes: list, spec: StudySpec) -> StudyResults:
    """`payload` with the best the run names for `outcomes`, as the session hands it on."""
    return StudyResults(choose_best(outcomes, spec.objective_specs), payload)


def test_the_summary_gives_the_start_up_seconds_of_the_best_and_the_baseline(make_tuner, tmp_path):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(
        study="up", trials=2, workload=WL, targets=["ttft<60s"], confirm_top=0, informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    outcomes = tuner.run()
    assert all(o.startup_s is not None for o in outcomes)
    p = prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"))
    payload = {"trials": [o.to_dict() for o in outcomes], "budget": tuner.budget_report}
    s = summarize(
        tuner.run_dir, chosen(payload, outcomes, spec), outcomes, spec.objective_specs, p.targets, "127.0.0.1", 8080
    )
    out = io.StringIO()
    print_summary(p, s, Console(file=out, width=300))
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("start-up (launch to healthy):"))
    assert f"best {s.best.startup_s:.0f} s" in line
    if not s.best.baseline:
        assert f"baseline {s.baseline.startup_s:.0f} s" in line
    # where the time went: every launch timed by phase, the start-up the same seconds as above
    assert all(o.time_spent and o.time_spent["startup_s"] <= o.startup_s + 0.5 for o in outcomes)
    assert any(ln.startswith("hardware time: ") and "search" in ln for ln in out.getvalue().splitlines())
    assert "  by phase: start-up" in out.getvalue()


def test_a_config_measured_once_says_so_once_and_its_plus_minus_is_labelled(make_tuner, tmp_path):
    # issue 22 §6: "(measured once) (measured once)"; §1: the +/- says it is a prior, not measured
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(
        study="once", trials=2, workload=WL, targets=["ttft<60s"], confirm_top=0, informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    outcomes = tuner.run()
    p = prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"))
    payload = {"trials": [o.to_dict() for o in outcomes], "budget": tuner.budget_report}
    s = summarize(
        tuner.run_dir, chosen(payload, outcomes, spec), outcomes, spec.objective_specs, p.targets, "127.0.0.1", 8080
    )
    out = io.StringIO()
    print_summary(p, s, Console(file=out, width=400))
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith(f"{spec.primary.name}: "))
    assert line.count("measured once") == 1
    assert "+/- " in line and "(prior 10%, not measured: no repeats yet)" in line


def test_the_summary_shows_the_verdict_and_the_baseline_sentinels_drift(make_tuner, tmp_path):
    # issue 22 §3, issue 28: the verdict and the sentinel series come from the study (results.json)
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),))
    spec = StudySpec(
        study="verdict",
        trials=2,
        workload=WL,
        targets=["ttft<60s"],
        confirm_top=1,
        confirm_pairs=2,
        informed_start=False,
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    tuner.run()
    tuner.confirm()
    outcomes = tuner.outcomes()
    p = prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"))
    payload = {"trials": [o.to_dict() for o in outcomes], "budget": tuner.budget_report, **tuner.study_report()}
    s = summarize(
        tuner.run_dir, chosen(payload, outcomes, spec), outcomes, spec.objective_specs, p.targets, "127.0.0.1", 8080
    )
    out = io.StringIO()
    print_summary(p, s, Console(file=out, width=400))
    lines = out.getvalue().splitlines()
    verdict = next(ln for ln in lines if ln.startswith("Verdict: "))
    assert payload["verdict"]["reason"] in verdict and s.payload["verdict"] == payload["verdict"]
    assert any(ln.startswith("  evidence: ") for ln in lines)
    drift = next(ln for ln in lines if ln.startswith("Baseline sentinel (after 0, 2 measured trials): "))
    assert "drift " in drift and "first to last" in drift


def test_the_best_command_line_carries_the_environment_the_launch_script_sets(make_tuner, tmp_path):
    # issue 41: a vLLM study's printed command line left out VLLM_CPU_OMP_THREADS_BIND
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(2,)),), extra_env={"FAKE_BIND": "0-1 [x]"})
    spec = StudySpec(study="env", trials=2, workload=WL, targets=["ttft<60s"], confirm_top=0).validate()
    tuner, _ = make_tuner(spec, launcher)
    outcomes = tuner.run()
    p = prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"))
    payload = {"trials": [o.to_dict() for o in outcomes], "budget": tuner.budget_report}
    s = summarize(
        tuner.run_dir, chosen(payload, outcomes, spec), outcomes, spec.objective_specs, p.targets, "127.0.0.1", 8080
    )
    out = io.StringIO()
    print_summary(p, s, Console(file=out, width=1000))
    lines = out.getvalue().splitlines()
    printed = lines[lines.index("Best command line:") + 1]
    words = shlex.split(printed)
    script = s.launch_script.read_text()
    assert words[0] == "FAKE_BIND=0-1 [x]" and "export FAKE_BIND='0-1 [x]'\n" in script
    assert words[1:] == launch_script.parse_exec_argv(script) == s.best_argv
    assert printed == s.best_command == json.loads(s.results_path.read_text())["best_command"]
