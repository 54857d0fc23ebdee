"""Which sampler a study asked for: `--sampler` / the study file's `sampler:` parsed once, at the
edge, into a `SamplerKind` (the tuner builds the Optuna sampler from it in tuner/search/samplers.py)."""

from __future__ import annotations

from kvtune.errors import SpecError
from kvtune.kinds import StrEnum


class SamplerKind(StrEnum):
    AUTO = "auto"
    TPE = "tpe"
    GP = "gp"
    RANDOM = "random"
    GRID = "grid"
    QMC = "qmc"


# What `auto` resolves to: the search the replay benchmark found best (docs/search-efficiency.md).
DEFAULT = SamplerKind.TPE


def parse_sampler(name: str | SamplerKind) -> SamplerKind:
    """A sampler name from the CLI / study file -> SamplerKind; `auto` -> the default."""
    try:
        kind = SamplerKind(str(name).strip().lower())
    except ValueError:
        raise SpecError(f"unknown sampler {name!r}: use one of "
                        f"{', '.join(k.value for k in SamplerKind)}") from None
    return DEFAULT if kind is SamplerKind.AUTO else kind
