"""Sizes and bandwidths typed by people: "24GiB", "15G", "3.35TB/s" -> bytes and bytes/s.

The planner's flags (--memory, --reserve, --weights, --bandwidth) take human units, and a GiB
read as a GB is a 7% error that can turn "7 sequences fit" into "6". So the units are explicit:
KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000, and a bare K/M/G/T means the
binary unit (as in `free -g`, `ls -h` and Docker's `--memory 15g`). Bandwidth uses the same
prefixes with an optional "/s" (spec sheets quote decimal TB/s). Bad input raises `SpecError`
with one line saying what was expected. Pure: no I/O.
"""

from __future__ import annotations

import math
import re

from kvtune.errors import SpecError

_PREFIX = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")
SIZE_HINT = "a size like 24GiB, 24GB, 1.5TiB, 512MiB, 15G or a byte count"
BANDWIDTH_HINT = "a bandwidth like 1TB/s, 3.35TB/s, 900GB/s or bytes per second"


def _scale(unit: str) -> int | None:
    """Multiplier of a unit suffix (case-insensitive), or None when it is not a byte unit."""
    u = unit.upper()
    if u.endswith("IB") and len(u) == 3 and u[0] in _PREFIX:  # KiB, MiB, GiB, TiB, PiB
        return int(1024 ** _PREFIX[u[0]])
    if u.endswith("B") and len(u) <= 2 and u[:-1] in _PREFIX:  # B, KB, MB, GB, TB, PB
        return int(1000 ** _PREFIX[u[:-1]])
    if u in _PREFIX:  # "", K, M, G, T, P (binary)
        return int(1024 ** _PREFIX[u])
    if len(u) == 2 and u[1] == "I" and u[0] in _PREFIX:  # Ki, Mi, Gi, Ti
        return int(1024 ** _PREFIX[u[0]])
    return None


def _parse(text: str, what: str, hint: str) -> float:
    if not isinstance(text, str):
        text = str(text)
    m = _NUMBER.match(text)
    scale = _scale(m.group(2)) if m else None
    if m is None or scale is None:
        raise SpecError(f"{what} {text!r} is not understood: expected {hint}")
    value = float(m.group(1)) * scale
    if not math.isfinite(value):
        raise SpecError(f"{what} {text!r} is too large")
    return value


def parse_size(text: str | int, what: str = "size") -> int:
    """'24GiB' -> 25769803776; '24GB' -> 24000000000; '15G' -> 15 GiB; '4096' -> 4096 bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise SpecError(f"{what} {text} is negative: expected {SIZE_HINT}")
        return text
    return int(round(_parse(str(text), what, SIZE_HINT)))


def parse_bandwidth(text: str | float, what: str = "bandwidth") -> float:
    """'1TB/s' -> 1e12; '3.35TB/s' -> 3.35e12; '900GB/s' -> 9e11 (bytes per second, > 0)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip()
        for tail in ("/s", "/S", "ps", "PS", "/sec"):
            if s.endswith(tail):
                s = s[: -len(tail)]
                break
        if not _NUMBER.match(s):
            raise SpecError(f"{what} {text!r} is not understood: expected {BANDWIDTH_HINT}")
        value = _parse(s, what, BANDWIDTH_HINT)
    if not (math.isfinite(value) and value > 0):
        raise SpecError(f"{what} {text!r} must be a positive {BANDWIDTH_HINT}")
    return value


_BARE = re.compile(r"^\s*[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?\s*$")


def size_flag(text: str | None, flag: str, *, positive: bool = False) -> int | None:
    """A size a person typed on a command line, in bytes (None: not given). A bare number is
    refused, not read as bytes (`--memory 24` planned for 24 bytes): the unit is the user's to
    state, and the message names the fix. Zero needs no unit, unless `positive` refuses it too."""
    if text is None:
        return None
    shown = text.strip()
    if _BARE.match(text) and float(text) != 0:
        raise SpecError(f"{flag} {shown} has no unit: give one, e.g. {shown}GiB (or {shown}GB, {shown}MiB)")
    value = parse_size(text, flag)
    if positive and value <= 0:
        raise SpecError(f"{flag} {shown}: expected a size above 0, e.g. 24GiB")
    return value


def bandwidth_flag(text: str | None, flag: str) -> float | None:
    """A bandwidth a person typed (None: not given); a bare number is refused as `size_flag`
    refuses one (`--bandwidth 1000` is not 1000 bytes/s)."""
    if text is None:
        return None
    shown = text.strip()
    if _BARE.match(text):
        raise SpecError(f"{flag} {shown} has no unit: give one, e.g. {shown}GB/s (or {shown}TB/s)")
    return parse_bandwidth(text, flag)


def gib(n: float) -> float:
    """Bytes -> GiB (powers of 1024), the unit every planner figure is printed in."""
    return n / 2**30
