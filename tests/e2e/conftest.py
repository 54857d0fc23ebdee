"""Every test under tests/e2e is an e2e test (it starts real servers or browsers), whether or not
its module says so: the mark is what `-m "not e2e"` deselects and what KVTUNE_REQUIRE_E2E=1
refuses to see skipped (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
