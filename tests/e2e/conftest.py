"""Every test under tests/e2e is an e2e test (it starts real servers or browsers), whether or not
its module says so: the mark is what `-m "not e2e"` deselects and what KVTUNE_REQUIRE_E2E=1
refuses to see skipped (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.errors import KvtuneError
from kvtune.launchers.llama_server import find_llama_server

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def llama_server() -> str:
    """The llama-server the e2e tests start (a skip names what is missing; CI fails a skip)."""
    try:
        return find_llama_server()
    except KvtuneError as e:
        pytest.skip(str(e))
