"""What the search varies, in backend-neutral terms: a `Knob` (one tunable server flag and its
range) and a `Candidate` (the flags and environment of one suggestion).

A leaf: the study record (study/), the search (tuner/search/) and every launcher read these
without importing one another; a launcher turns a Candidate into its argv.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind


@dataclass(frozen=True)
class Candidate:
    """Server flags and environment for one trial. ``flags`` values: str/int/float, or bool for
    switches (True renders ``--flag``, False renders the backend's negative form or nothing)."""

    flags: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"flags": dict(self.flags), "env": dict(self.env)}


@dataclass(frozen=True)
class Knob:
    """One tunable flag: a list of choices, an int/float range, or a fixed value.

    ``kind`` is a `KnobKind` (the plain words "choices", "int", "float", "fixed" are accepted
    and converted, as a study file spells them). Ranges use ``low``/``high`` (inclusive), with
    ``log`` for log-uniform sampling and ``step`` for ints.
    """

    name: str
    kind: KnobKind
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    step: int | None = None
    log: bool = False
    value: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, KnobKind):
            try:
                object.__setattr__(self, "kind", KnobKind(self.kind))
            except ValueError:
                raise SpecError(
                    f"knob {self.name}: unknown kind {self.kind!r}: use one of {', '.join(KnobKind.values())}"
                ) from None

    @property
    def bounds(self) -> tuple[float, float]:
        """(low, high) of an int or float range: typed, where `low`/`high` may be None."""
        if self.low is None or self.high is None:
            raise SpecError(f"knob {self.name}: a {self.kind.value} range needs low and high")
        return self.low, self.high

    def describe(self) -> str:
        if self.kind == KnobKind.FIXED:
            return f"{self.name} = {self.value!r}"
        if self.kind == KnobKind.CHOICES:
            return f"{self.name} in {list(self.choices)}"
        return f"{self.name} in [{self.low}, {self.high}]" + (" (log)" if self.log else "")
