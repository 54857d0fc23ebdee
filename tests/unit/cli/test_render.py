"""How `kvtune run` shows a study's summary (cli/render.py), line by line on a recording rich
Console: the change against the baseline coloured by better/worse and dimmed within the noise,
the disturbed measurements, the confirmation, the duels and the sentinel's drift. The whole
summary over a real study is tests/integration/cli/test_render.py."""

from __future__ import annotations

from rich.console import Console

from kvtune.cli import render
from kvtune.cli.render import change_text, print_disturbed
from kvtune.study.disturbed import DisturbedMeasurement


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


def test_where_duels_follow_the_confirmation_leaves_the_verdict_to_them():
    """The averaged order can put 1 before 3 where the duel says 3 beat 1: not two verdicts."""
    c = console()
    conf = {"held": True, "remeasured": [0, 1, 3], "order_before": [1, 3, 0], "order_after": [1, 3, 0]}
    render._confirmation(conf, c, duels=True)
    line = c.export_text().strip()
    assert "held" not in line
    assert line.endswith(
        "by their averaged figures 1 > 3 > 0 (0 is the baseline); the duels below, paired A B A B, decide the best."
    )
    c = console()
    render._confirmation({**conf, "held": False, "no_longer_feasible": [3]}, c, duels=True)
    assert "1 > 3 > 0 (0 is the baseline); no longer feasible: [3]; the duels below" in c.export_text()


def test_each_duel_is_one_line_naming_the_defaults():
    c = console()
    duels = [
        {"leader": 0, "rival": 5, "pairs": [1, 2, 3], "reason": "a tie within the noise"},
        {"leader": 5, "rival": 2, "pairs": [1], "reason": "5 wins", "remeasured_pairs": ["1 (disturbed)"]},
    ]
    render._decision({"duels": duels}, c)
    render._decision(None, c)
    assert c.export_text().splitlines() == [
        "Duel the defaults (0) vs trial 5 (A B A B, 3 pairs): a tie within the noise",
        "Duel trial 5 vs trial 2 (A B A B, 1 pair): 5 wins; measured again: 1 (disturbed)",
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
