"""KVTUNE_REQUIRE_E2E=1 (set by .ci/run): a skipped e2e test fails the suite, whatever skipped it
(a fixture, a skipif mark, the test body, a whole module), and says why; unit-test skips and
expected failures are left alone. Checked by running pytest on a tiny suite (pytester)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.conftest as suite_conftest

E2E_CONFTEST = Path(__file__).parents[1] / "e2e" / "conftest.py"

E2E_TESTS = """
import pytest

@pytest.fixture
def server():
    pytest.skip("no llama-server on PATH")

def test_fixture_skip(server):
    pass

@pytest.mark.skipif(True, reason="no chromium binary")
def test_mark_skip():
    pass

def test_body_skip():
    pytest.skip("import vllm fails")

@pytest.mark.xfail(reason="known bug")
def test_expected_failure():
    assert False

def test_passes():
    pass
"""


@pytest.fixture
def tiny_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """e2e/ (no module marks: the real tests/e2e/conftest.py marks them) and unit/."""
    monkeypatch.delenv(suite_conftest.REQUIRE_E2E, raising=False)
    pytester.makeini("[pytest]\nmarkers =\n    e2e: starts real servers\n")
    pytester.mkdir("e2e")
    pytester.mkdir("unit")
    (pytester.path / "e2e" / "conftest.py").write_text(E2E_CONFTEST.read_text())
    (pytester.path / "e2e" / "test_servers.py").write_text(E2E_TESTS)
    (pytester.path / "e2e" / "test_postgres.py").write_text(
        'import pytest\npytest.skip("PostgreSQL is not installed", allow_module_level=True)\n'
    )
    (pytester.path / "unit" / "test_tools.py").write_text(
        'import pytest\n\ndef test_unit_skip():\n    pytest.skip("systemd-analyze not installed")\n'
    )
    return pytester


def test_without_the_variable_skips_are_skips_and_their_reasons_are_printed(tiny_suite):
    result = tiny_suite.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=5, xfailed=1)
    for reason in ("no llama-server on PATH", "PostgreSQL is not installed"):
        result.stdout.fnmatch_lines([f"SKIPPED*{reason}"])


def test_with_the_variable_a_skipped_e2e_test_fails_with_its_reason(tiny_suite, monkeypatch):
    monkeypatch.setenv(suite_conftest.REQUIRE_E2E, "1")
    result = tiny_suite.runpytest(
        "-rs", "-p", "no:cacheprovider", "--continue-on-collection-errors", plugins=[suite_conftest]
    )
    # fixture and skipif skips -> errors in setup; module skip -> collection error; body -> failed
    result.assert_outcomes(passed=1, failed=1, errors=3, skipped=1, xfailed=1)
    assert result.ret != 0
    for reason in ("no llama-server on PATH", "no chromium binary", "import vllm fails", "PostgreSQL is not installed"):
        result.stdout.fnmatch_lines([f"*KVTUNE_REQUIRE_E2E=1 requires it to run: {reason}*"])
    result.stdout.fnmatch_lines(["*SKIPPED*systemd-analyze not installed*"])  # a unit test: still a skip


def test_only_the_value_1_turns_the_rule_on(tiny_suite, monkeypatch):
    monkeypatch.setenv(suite_conftest.REQUIRE_E2E, "0")
    result = tiny_suite.runpytest("-p", "no:cacheprovider", plugins=[suite_conftest])
    result.assert_outcomes(passed=1, skipped=5, xfailed=1)
