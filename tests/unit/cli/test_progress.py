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
