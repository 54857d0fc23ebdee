"""The fidelity gate in a whole study over real fake-server processes (testing/fake_server.py):
the fastest config's answers drift from the defaults' (its `answer-drift` knob stands for a
quantised KV cache), so the gate refuses it like a latency miss, the study names the fastest
config that still answers like the defaults, the verdict's fresh runs probe it again, and the
summary, results.json and the refusal line say what happened."""

from __future__ import annotations

import io
import json

from rich.console import Console

from kvtune.artifacts import report
from kvtune.artifacts.summary import summarize
from kvtune.cli.run_text import print_summary
from kvtune.kinds import FailureKind
from kvtune.knobs import Knob
from kvtune.study.results import study_results
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import prepare
from kvtune.tuner.trial.screening import SCREENED
from kvtune.workload import Workload

WL = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=8, warmup_requests=1, request_timeout_s=20)


def launcher() -> FakeLauncher:
    return FakeLauncher(
        base_ttft_ms=40,
        base_itl_ms=4,
        knobs=(Knob("speed", "choices", choices=(1, 4)), Knob("answer-drift", "choices", choices=(0, 6))),
    )


def test_a_faster_config_that_answers_differently_is_refused_and_the_best_answers_like_the_defaults(
    make_tuner, tmp_path
):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("why is the sky blue\nwrite a function\nwhat is 2 + 2\n")
    spec = StudySpec(
        study="fid",
        trials=5,
        workload=WL,
        sampler="grid",
        confirm_top=1,
        confirm_pairs=3,
        fidelity_prompts=str(prompts),
        startup_timeout_s=20,
    ).validate()
    tuner, _ = make_tuner(spec, launcher())
    assert [t.text for t in tuner.targets][-1] == "kld<0.01"  # added: the space can drift
    tuner.run()
    tuner.confirm()  # the verdict's fresh runs: the defaults' are the A/A floor
    outcomes = tuner.outcomes()
    by_flags = {(o.candidate.flags.get("speed"), o.candidate.flags.get("answer-drift")): o for o in outcomes}
    base = next(o for o in outcomes if o.baseline)
    assert base.fidelity["role"] == "reference" and len(base.fidelity["reference"]) == 3
    drifted = by_flags[(4, 6)]
    assert drifted.fidelity["role"] == "probed" and drifted.fidelity["changed"] == ["answer-drift"]
    assert drifted.failure is FailureKind.TARGET_MISSED and "kld<0.01" in drifted.reason
    assert by_flags[(4, 0)].fidelity["role"] == "not probed" and by_flags[(4, 0)].feasible

    p = prepare(spec, launcher=launcher(), runs_dir=str(tmp_path / "runs"))
    results = study_results(
        "fid", p.spec.to_dict(), {}, "fake 1.0", [t.describe() for t in p.targets], p.spec.objective_specs, outcomes
    )
    s = summarize(p.run_dir, results, outcomes, p.spec.objective_specs, p.targets, "127.0.0.1", 8080)
    assert s.best is not None and s.best.candidate.flags.get("answer-drift") in (0, None)
    assert "answer-drift" not in " ".join(s.best_argv)
    gate = json.loads(s.results_path.read_text())["fidelity"]
    # every drifting config that was measured in full is refused; one the screen cut after half its
    # requests (it could not reach the leader) was never probed, so the gate has nothing to refuse
    refused = sorted(
        o.number for o in outcomes if o.candidate.flags.get("answer-drift") == 6 and not o.metrics.get(SCREENED)
    )
    assert gate["state"] == "on" and [r["trial"] for r in gate["refused"]] == refused and drifted.number in refused
    # the verdict's fresh runs of the defaults were probed: the A/A floor
    floor_runs = [
        r for r in (base.confirmation or {}).get("runs", []) if (r.get("fidelity") or {}).get("role") == "floor"
    ]
    assert floor_runs and all(r["metrics"]["kld_upper"] < 1e-6 for r in floor_runs)
    html = report.render_report(json.loads(s.results_path.read_text()))
    assert 'id="plot-fidelity"' in html and "refused for fidelity" in html  # speed against fidelity
    out = io.StringIO()
    print_summary(p, s, Console(file=out, width=200))
    text = out.getvalue()
    assert "fidelity gate: kld<0.01" in text and "refused" in text
    assert f"trial {drifted.number} (answer-drift=6)" in text


def test_the_gate_off_judges_on_speed_alone_and_says_so(make_tuner, tmp_path):
    spec = StudySpec(
        study="nofid", trials=5, workload=WL, sampler="grid", confirm_top=0, fidelity_gate=False, startup_timeout_s=20
    ).validate()
    tuner, _ = make_tuner(spec, launcher())
    assert not any(t.fidelity for t in tuner.targets)
    outcomes = tuner.run()
    assert all(o.fidelity is None for o in outcomes)
    p = prepare(spec, launcher=launcher(), runs_dir=str(tmp_path / "runs"))
    results = study_results(
        "nofid", p.spec.to_dict(), {}, "fake 1.0", [t.describe() for t in p.targets], p.spec.objective_specs, outcomes
    )
    s = summarize(p.run_dir, results, outcomes, p.spec.objective_specs, p.targets, "127.0.0.1", 8080)
    assert s.fidelity is not None and s.fidelity.lines()[0].startswith("fidelity gate: off")
    assert 'id="plot-fidelity-note"' in report.render_report(json.loads(s.results_path.read_text()))
