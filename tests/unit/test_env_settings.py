"""The numbers kvtune reads from its environment (kvtune/env_settings.py): a value that is not
one leaves the default in place and is refused, one line naming the variable, by
`check_environment` (the CLI's main, before any command)."""

from __future__ import annotations

import pytest

from kvtune.env_settings import ENV_NUMBERS, check_environment, env_number
from kvtune.errors import SpecError


@pytest.mark.parametrize("name", sorted(ENV_NUMBERS))
@pytest.mark.parametrize("raw", ["", " ", "abc", "nan", "inf", "-1", "1e999"])
def test_what_is_no_number_is_refused_by_name_and_the_default_kept(monkeypatch, name, raw):
    monkeypatch.setenv(name, raw)
    assert env_number(name) == ENV_NUMBERS[name].default
    with pytest.raises(SpecError, match=f"^{name}={raw!r} is not a"):
        check_environment()


@pytest.mark.parametrize("name", ["KVTUNE_HEARTBEAT_S", "KVTUNE_GRACE_S", "KVTUNE_STORAGE_CONNECT_TIMEOUT_S"])
def test_whole_seconds_take_no_fraction_and_no_zero(monkeypatch, name):
    for raw in ("0", "1.5"):
        monkeypatch.setenv(name, raw)
        with pytest.raises(SpecError, match="whole number of seconds of at least 1"):
            check_environment()
    monkeypatch.setenv(name, " 3 ")
    check_environment()
    assert env_number(name) == 3 and isinstance(env_number(name), int)


def test_unset_is_the_default_and_a_retry_of_0_is_no_retry(monkeypatch):
    for name in ENV_NUMBERS:
        monkeypatch.delenv(name, raising=False)
    check_environment()
    assert env_number("KVTUNE_GRACE_S") == 20 and env_number("KVTUNE_PROXY_WAIT_S") == 10.0
    monkeypatch.setenv("KVTUNE_STORAGE_RETRY_S", "0")
    check_environment()
    assert env_number("KVTUNE_STORAGE_RETRY_S") == 0.0
