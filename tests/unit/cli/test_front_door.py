"""The front door: `kvtune run --help` shows the everyday flags in panels, every other setting is
a study-file key, and a flag that became one is refused in one line naming the key (exit 2 via
`kvtune.cli.main`, which prints `usage_error_line`). In process: click parses, nothing runs."""

from __future__ import annotations

import os

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from kvtune.cli import app
from kvtune.cli.app import clickx, usage_error_line
from kvtune.study.settings import all_settings

COMMANDS = get_command(app).commands  # type: ignore[attr-defined]
MOVED = sorted({(flag, s.key) for s in all_settings() for flag in s.doc.moved})


def refusal(command: str, argv: list[str]) -> str:
    with pytest.raises(clickx.UsageError) as e:
        COMMANDS[command].make_context(command, argv)
    return usage_error_line(e.value, [command, *argv])


def options(command: str) -> list[str]:
    return [o for p in COMMANDS[command].params for o in getattr(p, "opts", []) if o.startswith("--")]


@pytest.mark.parametrize(("flag", "key"), MOVED)
def test_a_flag_that_moved_to_the_study_file_is_refused_naming_its_key(flag, key):
    if flag in options("run"):
        pytest.skip(f"{flag} is still a flag of kvtune run")  # e.g. a bench-only move
    line = refusal("run", [flag, "1"] if not flag.startswith("--no-") else [flag])
    assert line.startswith(f"{flag} is a study-file key now: --set {key}="), line
    assert "kvtune settings" in line and "\n" not in line


@pytest.mark.parametrize("flag", ["--arrival", "--burstiness", "--timeout", "--duration", "--turns", "--trace-speed"])
def test_bench_refuses_its_moved_flags_the_same_way(flag):
    line = refusal("bench", ["http://127.0.0.1:9", flag, "1"])
    assert line.startswith(f"{flag} is a study-file key now: --set workload."), line


def test_an_unknown_flag_that_never_was_one_is_refused_as_before():
    assert "no such option --frobnicate" in refusal("run", ["--frobnicate", "1"])


def test_run_shows_about_twenty_flags_in_panels_under_120_lines_at_80_columns():
    flags = [o for o in options("run") if o != "--help"]
    assert 18 <= len(flags) <= 24, flags
    result = CliRunner().invoke(app, ["run", "--help"], env={**os.environ, "COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) < 120, len(lines)
    assert max(map(len, lines)) <= 80
    for panel in ("Goal", "Budget", "Server", "Traffic", "Study", "Cluster", "Output"):
        assert f" {panel} " in result.output


def test_bench_shows_about_twenty_flags():
    flags = [o for o in options("bench") if o != "--help"]
    assert len(flags) <= 20, flags


def test_settings_lists_every_key():
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 0
    for s in all_settings():
        assert f"  {s.key}  (" in result.output
