"""Off a terminal (a log file, CI), tables get 160 columns instead of rich's 80."""

import io

from kvtune.cli.consoles import OFF_TERMINAL_WIDTH, make_console


def test_off_a_terminal_the_console_is_wide_unless_columns_says(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console(file=io.StringIO()).width == OFF_TERMINAL_WIDTH
    monkeypatch.setenv("COLUMNS", "100")
    assert make_console(file=io.StringIO()).width == 100
