"""Which sampler a study asked for (study/sampler_choice.py): the word parsed once into a
`SamplerKind`, `auto` kept as asked and resolved to the default only for the search, and the GP
sampler refused up front without PyTorch (the module finder is injected: nothing about this
machine's installs is assumed). Moved here from tests/unit/tuner/search/test_samplers.py and
tests/unit/tuner/test_build.py."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.study.sampler_choice import DEFAULT, SamplerKind, check_sampler_installed, parse_sampler, sampler_kind
from kvtune.study.spec import StudySpec


@pytest.mark.parametrize(
    "name,kind",
    [
        ("tpe", SamplerKind.TPE),
        ("GP", SamplerKind.GP),
        ("random", SamplerKind.RANDOM),
        ("grid", SamplerKind.GRID),
        ("qmc", SamplerKind.QMC),
        ("auto", DEFAULT),
    ],
)
def test_sampler_names(name, kind):
    assert parse_sampler(name) is kind


def test_auto_is_kept_as_asked_and_runs_as_the_default_tpe():
    assert sampler_kind(" Auto ") is SamplerKind.AUTO  # the stored spec says what the user chose
    assert DEFAULT is SamplerKind.TPE and parse_sampler(SamplerKind.AUTO) is SamplerKind.TPE
    assert sampler_kind(SamplerKind.QMC) is SamplerKind.QMC


def test_unknown_sampler_is_one_line_naming_the_choices():
    with pytest.raises(SpecError) as e:
        parse_sampler("nosuch")
    assert "nosuch" in str(e.value) and "tpe" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(SpecError):
        StudySpec(sampler="nosuch").validate()


def test_the_gp_sampler_is_refused_up_front_without_torch():
    looked: list[str] = []

    def missing(name: str) -> None:
        looked.append(name)
        return None

    with pytest.raises(SpecError, match=r"sampler gp needs PyTorch .*pip install torch"):
        check_sampler_installed(SamplerKind.GP, find_module=missing)
    assert looked == ["torch"]
    check_sampler_installed(SamplerKind.GP, find_module=lambda name: object())  # torch found: fine
    check_sampler_installed(SamplerKind.TPE, find_module=missing)  # TPE needs no torch
    check_sampler_installed(SamplerKind.AUTO, find_module=missing)
    assert looked == ["torch"]  # only the gp study asked for it
