"""The `space:` section of a study file: each entry narrows, fixes, removes (null) or adds one
flag of the backend's default knobs. Parsed here once, into `Knob`s, for the spec and the study
file's up-front check alike."""

from __future__ import annotations

import math
from typing import Any

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob


def check_type(where: str, value: Any, types: tuple[type, ...], what: str) -> None:
    """One value of a study file of the right type, else a SpecError naming where (a bool is
    not a number here, though Python says it is an int)."""
    if isinstance(value, bool) and bool not in types:
        raise SpecError(f"{where} must be {what}, got {value!r}")
    if not isinstance(value, types):
        raise SpecError(f"{where} must be {what}, got {value!r}")


def parse_knob(name: str, raw: Any) -> Knob | None:
    """One `space:` entry -> Knob. list = choices, {low, high} = range, scalar = fixed,
    null = not tuned (the server's default)."""
    where = f"space.{name}"
    if raw is None:
        return None
    if isinstance(raw, list):
        if not raw:
            raise SpecError(f"{where} is an empty list: give at least one value")
        for v in raw:
            check_type(f"{where} choice", v, (str, int, float, bool), "a string, number or bool")
        return Knob(name, KnobKind.CHOICES, choices=tuple(raw))
    if isinstance(raw, dict):
        unknown = set(raw) - {"low", "high", "step", "log"}
        if unknown:
            raise SpecError(f"{where} has unknown key(s) {sorted(unknown)}: use low, high, step, log")
        if "low" not in raw or "high" not in raw:
            raise SpecError(f"{where} needs both low and high")
        low, high = raw["low"], raw["high"]
        check_type(f"{where}.low", low, (int, float), "a number")
        check_type(f"{where}.high", high, (int, float), "a number")
        if not (math.isfinite(low) and math.isfinite(high)):
            raise SpecError(f"{where}: low and high must be finite numbers")
        if low > high:
            raise SpecError(f"{where}: low ({low}) is greater than high ({high})")
        log = raw.get("log", False)
        check_type(f"{where}.log", log, (bool,), "true or false")
        if log and low <= 0:
            raise SpecError(f"{where}: a log range needs low > 0")
        is_int = isinstance(low, int) and isinstance(high, int)
        step = raw.get("step")
        if step is not None:
            check_type(f"{where}.step", step, (int,), "an integer")
            if step < 1 or not is_int:
                raise SpecError(f"{where}.step must be a positive integer on an integer range")
        return Knob(name, KnobKind.INT if is_int else KnobKind.FLOAT, low=low, high=high, step=step, log=log)
    check_type(where, raw, (str, int, float, bool), "a list, a {low, high} range or a value")
    return Knob(name, KnobKind.FIXED, value=raw)


def parse_space(space: Any) -> dict[str, Knob | None]:
    if not isinstance(space, dict):
        raise SpecError(f"space must be a mapping of flag name -> values, got {space!r}")
    out: dict[str, Knob | None] = {}
    for name, raw in space.items():
        if not isinstance(name, str) or not name.strip("-"):
            raise SpecError(f"space has an invalid flag name {name!r}")
        clean = name.lstrip("-")
        out[clean] = parse_knob(clean, raw)
    return out


def merge_knobs(defaults: list[Knob], space: dict[str, Any]) -> list[Knob]:
    """The study's knobs: the backend's defaults with the study file's entries fixed, narrowed,
    removed (null) or added."""
    overrides = parse_space(space)
    knobs: list[Knob] = []
    for k in defaults:
        given = overrides.get(k.name, k)
        if given is not None:
            knobs.append(given)
    default_names = {k.name for k in defaults}
    knobs += [k for n, k in overrides.items() if n not in default_names and k is not None]
    if not any(k.kind != "fixed" for k in knobs):
        raise SpecError("the search space is empty: every flag is fixed, nothing left to tune")
    return knobs
