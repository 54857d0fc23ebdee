"""The numbers a server's count and share flags can take, for the study file's `space:`.

A build's ``--help`` says a flag takes a number (`FlagTable`), not which: `parallel: [0]` or
`threads: {low: -4, high: 8}` passed that check, and every trial of such a value launched a
server that refused it or ran something else (llama-server reads --parallel -1 as "auto", 0 as
nothing it documents). These are the ranges the servers document, with the special values they
name (-1 = auto), so a value outside them is one line before any launch. A flag not listed
here is left to the server. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob


@dataclass(frozen=True)
class ValueRange:
    """`low`..`high` (None: no upper bound), whole numbers unless `whole` is False; `specials`
    are values outside it the server documents (e.g. {-1: "auto"}); `above_low`: `low` itself
    excluded (a share such as gpu-memory-utilization must be more than 0)."""

    low: float
    high: float | None = None
    whole: bool = True
    specials: Mapping[float, str] = field(default_factory=dict)
    above_low: bool = False

    def problem(self, value: Any, specials: bool = True) -> str | None:
        """Why `value` is outside the range (the tail of a sentence), or None."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            return None  # not a number: FlagTable's check says so
        if specials and v in self.specials:
            return None
        if self.whole and v != int(v):
            return "is not a whole number"
        if v < self.low or (self.above_low and v == self.low) or (self.high is not None and v > self.high):
            return "is out of range"
        return None

    def describe(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        low = f"more than {self.low:g}" if self.above_low else f"at least {self.low:g}"
        span = f"{low} and at most {self.high:g}" if self.high is not None else low
        extra = "".join(f" (or {k:g} = {v})" for k, v in self.specials.items())
        return f"{kind} of {span}{extra}"


_COUNT = ValueRange(1)
_COUNT_OR_AUTO = ValueRange(1, specials={-1: "auto"})

RANGES: dict[str, dict[str, ValueRange]] = {
    "llama-server": {
        "parallel": _COUNT_OR_AUTO,
        "threads": _COUNT_OR_AUTO,
        "threads-batch": _COUNT_OR_AUTO,
        "threads-http": _COUNT_OR_AUTO,
        "batch-size": _COUNT,
        "ubatch-size": _COUNT,
        "ctx-size": ValueRange(0),  # 0 = the model's own context
        "ctx-per-slot": _COUNT,  # kvtune's: rendered as --ctx-size = slots x this
        "cache-reuse": ValueRange(0),
        "draft-max": ValueRange(0),
        "draft-min": ValueRange(0),
    },
    "vllm": {
        "max-num-seqs": _COUNT,
        "max-num-batched-tokens": _COUNT,
        "max-model-len": _COUNT,
        "tensor-parallel-size": _COUNT,
        "pipeline-parallel-size": _COUNT,
        "data-parallel-size": _COUNT,
        "block-size": _COUNT,
        "gpu-memory-utilization": ValueRange(0, 1, whole=False, above_low=True),
        "num-speculative-tokens": _COUNT,
    },
}


def check_ranges(backend: str, knobs: Mapping[str, Knob]) -> None:
    """Refuse (SpecError, one line) a `space:` value outside its flag's documented range. A
    {low, high} range must lie inside it whole (the specials are single values, not ranges)."""
    ranges = RANGES.get(backend, {})
    for name, knob in knobs.items():
        r = ranges.get(name)
        if r is None:
            continue
        if knob.kind in (KnobKind.INT, KnobKind.FLOAT):
            values, specials = [knob.low, knob.high], False
        elif knob.kind == KnobKind.CHOICES:
            values, specials = list(knob.choices), True
        else:
            values, specials = [knob.value], True
        for value in values:
            if value is None or isinstance(value, bool):
                continue
            problem = r.problem(value, specials)
            if problem:
                raise SpecError(f"space.{name}: {value!r} {problem}: --{name} takes {r.describe()}")
