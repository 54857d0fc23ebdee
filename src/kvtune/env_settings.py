"""The numbers kvtune takes from its environment (heartbeat, grace period, storage waits), read
in one place. Their modules read them at import, as module constants: a value that was not a
number (`KVTUNE_GRACE_S=abc`, or set but empty) was a ValueError traceback from the import of
the CLI, before any command ran (`kvtune --help` included), and a zero or a negative one was
taken (a grace period of 0 s re-queues every running trial, a connect timeout of 0 means no
timeout for the PostgreSQL driver). Here a bad value leaves the default in the constant and is
recorded; `check_environment` (the CLI's `main`, before any command) refuses it in one line
that names the variable and the value given.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from kvtune.errors import SpecError


@dataclass(frozen=True)
class EnvNumber:
    """One number read from the environment: its default, whether it counts whole seconds, and
    the least value that makes sense."""

    name: str
    default: float
    whole: bool
    least: float  # the smallest value accepted
    meaning: str  # what it sets, for the refusal

    def parse(self, raw: str) -> float:
        """The value `raw` gives, or SpecError in one line."""
        kind = "a whole number of seconds" if self.whole else "a number of seconds"
        text = raw.strip()
        try:
            value = int(text) if self.whole else float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < self.least:
            least = f"{self.least:g}"
            raise SpecError(
                f"{self.name}={raw!r} is not {kind} of at least {least} ({self.meaning}): "
                f"give one, or unset it for the default {self.default:g}"
            )
        return value


ENV_NUMBERS = {
    e.name: e
    for e in (
        EnvNumber("KVTUNE_HEARTBEAT_S", 5, True, 1, "how often a running trial's worker beats"),
        EnvNumber("KVTUNE_GRACE_S", 20, True, 1, "how long a trial's worker may stay silent"),
        EnvNumber("KVTUNE_STORAGE_CONNECT_TIMEOUT_S", 10, True, 1, "the wait for a database to answer"),
        EnvNumber("KVTUNE_PROXY_WAIT_S", 10, False, 0.1, "the wait for a kvtune proxy to answer"),
        EnvNumber("KVTUNE_STORAGE_RETRY_S", 120, False, 0, "how long storage calls are retried"),
    )
}


def env_number(name: str) -> float:
    """The value of the environment number `name` (ENV_NUMBERS), its default when unset or not
    valid: `check_environment` refuses an invalid one before any command runs."""
    setting = ENV_NUMBERS[name]
    raw = os.environ.get(name)
    if raw is None:
        return int(setting.default) if setting.whole else setting.default
    try:
        return setting.parse(raw)
    except SpecError:
        return int(setting.default) if setting.whole else setting.default


def check_environment() -> None:
    """SpecError, one line, for the first environment number set to what is not one."""
    for name, setting in ENV_NUMBERS.items():
        raw = os.environ.get(name)
        if raw is not None:
            setting.parse(raw)
