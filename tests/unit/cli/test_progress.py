"""Progress output: rows appear per trial (plain and live), quiet is quiet, JSON lines parse.

The tests here start no process; those that do are in tests/integration/cli/test_progress.py."""

from kvtune.knobs import Knob
from kvtune.testing.fake_launcher import FakeLauncher

LAUNCHER = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2)),))


def test_flags_are_shown_as_key_value_pairs():
    from kvtune.cli.progress import fmt_flags
    from kvtune.knobs import Candidate

    assert fmt_flags(Candidate()) == "(server defaults)"
    assert fmt_flags(Candidate(flags={"parallel": 4}, env={"OMP": "1"})) == "parallel=4 OMP=1"


def test_a_row_shows_start_up_seconds_and_the_planner_kv_figure_beside_vllm_s():
    from kvtune.cli.progress import row_extra
    from kvtune.knobs import Candidate
    from kvtune.study.outcome import TrialOutcome

    o = TrialOutcome(
        number=1,
        candidate=Candidate(),
        argv=[],
        env={},
        startup_s=74.4,
        server_facts={"kv_cache_tokens": 449648, "kv_cache_tokens_predicted": 449648},
    )
    assert row_extra(o) == "  start 74s  KV 449648 tok (planner 449648)"
    assert row_extra(TrialOutcome(number=2, candidate=Candidate(), argv=[], env={})) == ""


def test_a_screened_trial_says_it_was_not_measured_in_full():
    from kvtune.cli.progress import status_text
    from kvtune.knobs import Candidate
    from kvtune.study.outcome import TrialOutcome

    o = TrialOutcome(number=3, candidate=Candidate(), argv=[], env={}, metrics={"output_throughput": 9.0})
    assert "screened" not in status_text(o)
    o.metrics = {"output_throughput": 9.0, "screened": 1.0}
    assert "screened: its short run cannot reach the leader" in status_text(o)
