"""The contract's server_defaults check catches a default of a flag the backend does not tune."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvtune.testing import contract
from kvtune.testing.fake_launcher import FakeLauncher
from tests.contract.test_launcher_contract import fake_case


class UntunedDefault(FakeLauncher):
    def server_defaults(self) -> dict:
        return {"speed": 1, "not-a-knob": 3}


def test_a_default_of_an_untuned_flag_is_caught(tmp_path: Path) -> None:
    case = replace(fake_case(tmp_path), launcher=UntunedDefault())
    with pytest.raises(AssertionError, match="not-a-knob"):
        contract.check_server_defaults(case)
