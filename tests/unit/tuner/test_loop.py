"""The ask -> launch -> measure -> tell loop, on the fake launcher (real processes, real client,
real SQLite storage).

The tests here start no process; those that do are in tests/integration/tuner/test_loop.py."""

from kvtune.kinds import Direction
from tests.paths import SRC


def test_no_shell_true_anywhere():
    src = SRC
    offenders = [p for p in src.rglob("*.py") if "shell=True" in p.read_text()]
    assert offenders == []


def test_confirmation_summary_counts_the_baseline():
    """The demo's case: trial 5 beat the baseline by noise; re-measured, the baseline wins."""
    from kvtune.launchers.base import Candidate
    from kvtune.study.outcome import TrialOutcome
    from kvtune.study.results import best_outcome, confirmation_summary

    def o(n, value, again, baseline=False):
        t = TrialOutcome(
            number=n,
            candidate=Candidate(),
            argv=[],
            env={},
            baseline=baseline,
            metrics={"output_throughput": value},
            constraints={"x": -1.0},
            objective=value,
        )
        t.confirmation = {"objective": again, "feasible": True}
        return t

    outcomes = [o(0, 81.5, 79.5, baseline=True), o(5, 83.6, 76.5)]
    summary = confirmation_summary(outcomes, Direction.MAXIMIZE)
    assert summary["order_before"] == [5, 0] and summary["order_after"] == [0, 5]
    assert not summary["held"]
    assert best_outcome(outcomes, Direction.MAXIMIZE).number == 0
