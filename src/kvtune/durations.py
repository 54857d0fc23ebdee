"""Durations as people write them (``2h``, ``90m``, ``1h30m``) and back: `--time-budget`,
`--startup-timeout` and the summary's wall times all read and print them here. A leaf."""

from __future__ import annotations

import math
import re

from kvtune.errors import SpecError

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
# ASCII digits only: `\d` alone reads '١٢' (Arabic-Indic digits) as 12 s, which no other number
# kvtune takes does (the flags' whole numbers, the targets).
_NUM = r"(\d+(?:\.\d+)?|\.\d+)"
_DURATION_RE = re.compile(rf"^(?:{_NUM}d)?(?:{_NUM}h)?(?:{_NUM}m)?(?:{_NUM}s)?$", re.ASCII)
_BARE_RE = re.compile(rf"^{_NUM}$", re.ASCII)
_MS_RE = re.compile(rf"^{_NUM}ms$", re.ASCII)
_HOW = "write a positive duration such as 2h, 90m, 45s or 1h30m"


def parse_duration(text: str | int | float, what: str = "--time-budget", zero_ok: bool = False) -> float:
    """Seconds in ``2h``, ``90m``, ``45s``, ``1h30m``, ``1.5h``, ``1d``, ``500ms`` or a bare
    number of seconds (``3600``). Raise `SpecError`, one line naming `what` and how to write it,
    for anything else, a negative, or zero unless `zero_ok` (a pause may be none: a think time)."""
    if isinstance(text, bool):
        raise SpecError(f"{what} {text!r} is not a duration; {_HOW}")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        s = str(text).strip().lower().replace(" ", "")
        if s.startswith("-"):
            raise SpecError(f"{what} {text!r} is negative; {_HOW}")
        bare = _BARE_RE.match(s)
        millis = _MS_RE.match(s)
        m = _DURATION_RE.match(s)
        if bare:
            seconds = float(bare[1])
        elif millis:
            seconds = float(millis[1]) / 1000.0
        elif s and m:
            seconds = sum(float(v) * f for v, f in zip(m.groups(), _UNITS.values()) if v)
        else:
            raise SpecError(f"{what} {text!r} is not a duration; {_HOW}")
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero_ok):
        raise SpecError(f"{what} {text!r} must be {'zero or more' if zero_ok else 'more than zero'}; {_HOW}")
    return seconds


def format_duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``, ``45`` -> ``45s``, ``7200`` -> ``2h`` (what parse_duration reads)."""
    total = max(0, round(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v]
    return "".join(parts) or "0s"
