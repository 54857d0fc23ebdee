"""Which sampler a study asked for: `--sampler` / the study file's `sampler:` parsed once, at the
edge, into a `SamplerKind` (the tuner builds the Optuna sampler from it in tuner/search/samplers.py)."""

from __future__ import annotations

import importlib.util
from typing import Callable

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


def sampler_kind(name: str | SamplerKind) -> SamplerKind:
    """A sampler name from the CLI / study file -> SamplerKind as asked (`auto` stays `auto`, so
    the stored spec says what the user chose)."""
    if isinstance(name, SamplerKind):
        return name
    try:
        return SamplerKind(str(name).strip().lower())
    except ValueError:
        raise SpecError(f"unknown sampler {name!r}: use one of {', '.join(k.value for k in SamplerKind)}") from None


def parse_sampler(name: str | SamplerKind) -> SamplerKind:
    """A sampler name -> the search that runs: `auto` -> the default."""
    kind = sampler_kind(name)
    return DEFAULT if kind is SamplerKind.AUTO else kind


def check_sampler_installed(kind: SamplerKind, find_module: Callable[[str], object] = importlib.util.find_spec) -> None:
    """Optuna's GPSampler imports PyTorch, which kvtune does not depend on: without it a gp study
    would fail at its first sampled trial, after the baseline was measured. Refuse up front."""
    if parse_sampler(kind) is SamplerKind.GP and find_module("torch") is None:
        raise SpecError(
            "sampler gp needs PyTorch (Optuna's GPSampler imports it): "
            "pip install torch, or use another sampler (tpe, random, qmc, grid)"
        )
