"""Progress output: rows appear per trial (plain and live), quiet is quiet, JSON lines parse.

Here the tests that start processes; the rest are in tests/unit/cli/test_progress.py."""

import io
import json

from rich.console import Console

from kvtune.cli.progress import make_reporter
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from tests.conftest import TINY

LAUNCHER = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 2)),))


def run_with(make_tuner, mode, terminal=False):
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=terminal, width=200, highlight=False)
    reporter = make_reporter(mode, console, 2)
    tuner, _ = make_tuner(
        StudySpec(study=f"p-{mode}", trials=2, workload=TINY).validate(), LAUNCHER, callbacks=reporter.callbacks()
    )
    tuner.run()
    reporter.close()
    return buf.getvalue()


def test_plain_rows_per_trial(make_tuner):
    out = run_with(make_tuner, "plain")
    assert "trial 0: baseline (server defaults)" in out
    assert out.count("TTFT p95") == 2 and "#0" in out and "#1" in out and "feasible" in out


def test_live_table_with_bar(make_tuner):
    out = run_with(make_tuner, "auto", terminal=True)
    assert "TTFT p95" in out and "baseline" in out and "ETA" in out and "2/2" in out


def test_quiet_is_quiet(make_tuner):
    assert run_with(make_tuner, "quiet") == ""


def test_jsonl_events(make_tuner, capsys):
    run_with(make_tuner, "jsonl")
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.count("trial_started") == 2 and kinds.count("trial_finished") == 2
    finished = [e for e in events if e["event"] == "trial_finished"]
    assert finished[0]["baseline"] and "metrics" in finished[0] and "feasible" in finished[0]
    assert finished[0]["feasible"] and finished[0]["failure"] is None  # the kind, null when feasible
