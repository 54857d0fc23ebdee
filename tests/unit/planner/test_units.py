"""Sizes and bandwidths as people type them (planner/units.py): binary units for KiB..TiB and a
bare K/M/G/T, decimal for KB..TB, bandwidth with an optional "/s", and one-line SpecErrors that
name the flag. (The parsing cases moved from tests/unit/planner/test_kv.py.)"""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.planner.units import BANDWIDTH_HINT, SIZE_HINT, bandwidth_flag, gib, parse_bandwidth, parse_size, size_flag

GiB = 2**30


@pytest.mark.parametrize(
    "text,expected",
    [
        ("24GiB", 24 * GiB),
        ("24GB", 24_000_000_000),
        ("1.5TiB", 3 * 2**39),
        ("512MiB", 512 * 2**20),
        ("15G", 15 * GiB),
        ("15g", 15 * GiB),
        ("24 GiB", 24 * GiB),
        ("4096", 4096),
        ("2KB", 2000),
        ("0", 0),
        ("1e3MB", 10**9),
        (1234, 1234),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "24XB", "-1GiB", "24 GiB GiB", "1..5G", "abc", "nan", "24Gbit"])
def test_parse_size_rejects_bad_input(text):
    with pytest.raises(SpecError) as e:
        parse_size(text, "--memory")
    assert "--memory" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1TB/s", 1e12),
        ("3.35TB/s", 3.35e12),
        ("900GB/s", 9e11),
        ("900 GB/s", 9e11),
        ("900GB", 9e11),
        ("1e12", 1e12),
        ("2TiB/s", 2 * 2**40),
        (4.8e12, 4.8e12),
    ],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "fast", "0TB/s", "-1TB/s", "1XB/s", "/s", 0])
def test_parse_bandwidth_rejects_bad_input(text):
    with pytest.raises(SpecError, match="bandwidth"):
        parse_bandwidth(text)


def test_a_negative_byte_count_and_a_huge_size_are_refused():
    with pytest.raises(SpecError, match=f"^--reserve -1 is negative: expected {SIZE_HINT}$"):
        parse_size(-1, "--reserve")
    with pytest.raises(SpecError, match="^size '1e400' is too large$"):
        parse_size("1e400")


def test_the_errors_say_what_was_expected():
    with pytest.raises(SpecError) as e:
        parse_bandwidth("fast", "--bandwidth")
    assert str(e.value) == f"--bandwidth 'fast' is not understood: expected {BANDWIDTH_HINT}"
    assert parse_bandwidth("900GBps") == 9e11 and parse_bandwidth("1TB/sec") == 1e12


def test_gib_is_bytes_in_powers_of_1024():
    assert gib(24 * GiB) == 24.0 and gib(24_000_000_000) == pytest.approx(22.35, abs=0.01)


# --- sizes and bandwidths on `kvtune plan`'s command line: a bare number is refused ----------------


@pytest.mark.parametrize(
    "text,flag,fix",
    [
        ("24", "--memory", "--memory 24 has no unit: give one, e.g. 24GiB"),
        (" 15 ", "--weights", "--weights 15 has no unit: give one, e.g. 15GiB"),
        ("2.5", "--reserve", "--reserve 2.5 has no unit: give one, e.g. 2.5GiB"),
        ("1e9", "--memory", "--memory 1e9 has no unit"),
    ],
)
def test_a_bare_size_on_the_command_line_is_refused_naming_the_fix(text, flag, fix):
    with pytest.raises(SpecError) as e:
        size_flag(text, flag)
    assert str(e.value).startswith(fix) and "\n" not in str(e.value)


def test_a_size_flag_with_a_unit_is_read_and_zero_needs_none():
    assert size_flag("24GiB", "--memory") == 24 * GiB
    assert size_flag("24GB", "--memory") == 24_000_000_000
    assert size_flag("0", "--reserve") == 0 and size_flag(None, "--reserve") is None
    with pytest.raises(SpecError, match="--memory 0: expected a size above 0"):
        size_flag("0", "--memory", positive=True)
    with pytest.raises(SpecError, match="--memory 0GiB: expected a size above 0"):
        size_flag("0GiB", "--memory", positive=True)


def test_a_bare_bandwidth_is_refused_and_one_with_a_unit_read():
    with pytest.raises(SpecError, match="--bandwidth 1000 has no unit: give one, e.g. 1000GB/s"):
        bandwidth_flag("1000", "--bandwidth")
    assert bandwidth_flag("1TB/s", "--bandwidth") == 1e12 and bandwidth_flag(None, "--bandwidth") is None
