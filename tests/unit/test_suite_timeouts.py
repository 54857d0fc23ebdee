"""The suite's per-test ceilings (tests/conftest.py): an e2e test gets E2E_TIMEOUT_S unless it names
its own, a unit test keeps pyproject.toml's default; and the e2e ceiling stays above the longest
timeout the e2e tests give their own subprocesses, so theirs fires first and names the command.
Checked by running pytest on a tiny suite (pytester)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import tests.conftest as suite_conftest

E2E_CONFTEST = Path(__file__).parents[1] / "e2e" / "conftest.py"

E2E_TESTS = """
import pytest

def test_gets_the_e2e_ceiling(request):
    assert request.node.get_closest_marker("timeout").args == ({ceiling},)

@pytest.mark.timeout(7)
def test_keeps_its_own(request):
    assert request.node.get_closest_marker("timeout").args == (7,)
"""

UNIT_TEST = """
def test_has_no_mark(request):
    assert request.node.get_closest_marker("timeout") is None
"""


def test_e2e_tests_get_the_e2e_ceiling_and_unit_tests_the_default(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nmarkers =\n    e2e: starts real servers\n")
    pytester.mkdir("e2e")
    pytester.mkdir("unit")
    (pytester.path / "e2e" / "conftest.py").write_text(E2E_CONFTEST.read_text())
    (pytester.path / "e2e" / "test_servers.py").write_text(E2E_TESTS.format(ceiling=suite_conftest.E2E_TIMEOUT_S))
    (pytester.path / "unit" / "test_tools.py").write_text(UNIT_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", plugins=[suite_conftest])
    result.assert_outcomes(passed=3)


def test_the_e2e_ceiling_is_above_the_e2e_commands_own_timeout():
    from tests.e2e import conftest as e2e_conftest

    own = inspect.signature(e2e_conftest.kvtune).parameters["timeout"].default
    assert 0 < own < suite_conftest.E2E_TIMEOUT_S
