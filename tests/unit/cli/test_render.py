"""How `kvtune run` shows a study's summary (cli/run_text.py), line by line on a recording rich
Console: the change against the baseline coloured by better/worse and dimmed within the noise,
the disturbed measurements, the confirmation, the verdict, the sentinel's drift and where the
hardware time went. The whole summary over a real study is tests/integration/cli/test_render.py."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from kvtune.artifacts.summary import StudySummary
from kvtune.cli import run_text as render
from kvtune.cli.run_text import change_text, print_disturbed
from kvtune.objectives.objective import objective
from kvtune.study.disturbed import DisturbedMeasurement
from kvtune.study.results import choose_best
from kvtune.study.time_spent import TimeSpent
from kvtune.verdict import Counted, DecisionKind, Effect, TargetCheck, Verdict

OBJECTIVES = (objective("output_throughput"),)


def console() -> Console:
    return Console(record=True, width=500, color_system=None)  # one line stays one line


def test_a_change_is_green_when_better_red_when_worse_dim_within_the_noise():
    assert change_text({"change_pct": 12.34, "better": True}) == "[green]+12.3%[/green]"
    assert change_text({"change_pct": -5.0, "better": False, "change_pm_pct": 2.04}) == "[red]-5.0% +/- 2.0[/red]"
    assert change_text({"change_pct": 1.0, "better": True, "within_noise": True, "change_pm_pct": 3.0}) == (
        "[dim]+1.0% +/- 3.0[/dim]"
    )


def test_the_disturbed_measurements_are_listed_with_what_became_of_each():
    c = console()
    print_disturbed([], c)
    assert c.export_text() == ""
    d = DisturbedMeasurement(3, "first measurement", 1.5, "foreign CPU 1.5 cores [pip]", 2, True)
    print_disturbed([d], c)
    text = c.export_text()
    assert text.startswith("Disturbed measurements (1: the machine was busy with something else while they ran):")
    assert f"  {d.text()}" in text and "[pip]" in text  # printed as text, not as markup


def test_the_confirmation_says_whether_the_ranking_held():
    c = console()
    render._confirmation(None, c)
    render._confirmation({"held": True, "remeasured": [0, 4], "order_after": [4, 0]}, c)
    conf = {"held": False, "order_before": [4, 0], "order_after": [0, 4], "no_longer_feasible": [4]}
    render._confirmation(conf, c)
    first, second = c.export_text().splitlines()
    assert (
        first
        == "Confirmation: re-measured trials [0, 4] with fresh servers; the ranking held (4 > 0; 0 is the baseline)."
    )
    assert second.startswith("Confirmation changed the ranking (0 is the baseline): before 4 > 0, averaged")
    assert "no longer feasible: [4]" in second


def test_where_a_verdict_decided_the_confirmation_line_ranks_nothing():
    """The averaged order can put 1 before 3 where the verdict named 3: not two verdicts."""
    c = console()
    conf = {"held": True, "remeasured": [0, 1, 3], "order_before": [1, 3, 0], "order_after": [1, 3, 0]}
    render._confirmation(conf, c, decided=True)
    line = c.export_text().strip()
    assert "held" not in line and "1 > 3" not in line
    assert line == (
        "Confirmation: re-measured trials [0, 1, 3] on fresh servers (0 is the baseline); the verdict above rests on those runs."
    )
    c = console()
    render._confirmation({**conf, "held": False, "no_longer_feasible": [3]}, c, decided=True)
    assert "(0 is the baseline); no longer feasible: [3]; the verdict above" in c.export_text()


def test_the_verdict_says_the_decision_its_effects_the_targets_and_what_it_could_detect():
    verdict = Verdict(
        kind=DecisionKind.MEETS_WHERE_DEFAULTS_MISS,
        named=6,
        reason="trial 6 meets tpot_p95<0.7x where the defaults do not.",
        candidate=6,
        baseline=0,
        effects=(Effect("output_throughput", 0.88, 0.80, 0.97, 3),),
        targets=(
            TargetCheck("tpot_p95<0.7x", "candidate", 21.0, 19.5, 22.6, 23.1, "met", 3),
            TargetCheck("tpot_p95<0.7x", "defaults", 33.0, 31.0, 35.1, 23.1, "missed", 3),
        ),
        mde=0.18,
        alpha=0.04,
        counted=Counted(pairs=3, screened=0, disturbed=1, looks=1),
    )
    assert render.verdict_lines(None) == []
    lines = render.verdict_lines(verdict.to_dict())
    assert lines == [
        "Verdict: meets the targets where the defaults miss. trial 6 meets tpot_p95<0.7x where the defaults do not.",
        "  effect of trial 6 against the defaults (3 fresh runs each, 95% CI): output_throughput -12.0% [-20.0%, -3.0%]",
        "  trial 6 met tpot_p95<0.7x: 21 [19.5, 22.6] against 23.1",
        "  the defaults missed tpot_p95<0.7x: 33 [31, 35.1] against 23.1",
        "  the smallest gain this evidence could detect: +18% (80% power, 4% false wins)",
        "  evidence: 0 screening run(s), 3 pair(s) D W W D over 1 look(s), 1 disturbed run(s) not used; "
        "false wins held to 4% (group-sequential test, docs/verdicts.md)",
    ]


def test_the_sentinel_line_gives_the_series_and_its_drift():
    c = console()
    render._drift(None, c)
    block = {
        "series": [
            {"measured": 0, "objective": 100.0},
            {"measured": 10, "objective": 60.0, "disturbed": True},
            {"measured": 20, "objective": None},
            {"measured": 30, "objective": 90.0},
        ],
        "drift": {"ratio": 0.9, "beyond_noise": True, "noise": "pooled noise 2.0%, 10 dof"},
    }
    render._drift(block, c)
    assert c.export_text().strip() == (
        "Baseline sentinel (after 0, 10, 20, 30 measured trials): 100 -> 60 -> - -> 90; drift -10.0% first to "
        "last, beyond the noise: the machine's state changed during the study (pooled noise 2.0%, 10 dof); "
        "1 point(s) disturbed, not used"
    )


def test_the_time_lines_name_the_anchor_and_the_load_search_only_when_they_launched():
    one = TimeSpent(startup_s=30.0, measurement_s=10.0).to_dict()
    plain = {"trials": [{"time_spent": one}]}
    both = {**plain, "anchor": {"runs": [{"time_spent": one}]}, "load_search": {"load": {}, "time_spent": one}}
    lines = []
    for payload in (plain, both):
        c = console()
        render._spending(StudySummary(0, payload, Path("results.json"), choose_best([], OBJECTIVES)), c)
        lines.append(c.export_text().splitlines()[0])
    assert lines[0] == "hardware time: 40s in 1 launch: search 40s (1 launch)"
    assert lines[1] == (
        "hardware time: 2m in 3 launches: search 40s (1 launch), anchor 40s (1 launch), load search 40s (1 launch)"
    )


def test_the_anchor_line_shows_only_when_the_defaults_first_measurement_was_disturbed():
    c = console()
    render.print_anchor(None, c)
    assert c.export_text() == ""
    render.print_anchor({"runs": [{"quiet": False}, {"quiet": True}], "quiet": {"quiet": True}}, c)
    assert c.export_text().startswith(
        "Relative targets were anchored on the defaults measured again, quiet (anchor run 2 of 2)"
    )
