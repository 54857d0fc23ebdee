"""The ask -> launch -> measure -> tell loop, on the fake launcher (real processes, real client,
real SQLite storage).

The tests here start no process; those that do are in tests/integration/tuner/test_loop.py."""

from tests.paths import SRC


def test_no_shell_true_anywhere():
    sources = list(SRC.rglob("*.py"))
    assert len(sources) > 50  # the package's sources were found: an empty list would pass below
    offenders = [p for p in sources if "shell=True" in p.read_text()]
    assert offenders == []
