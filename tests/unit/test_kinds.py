"""The typed core's enums (kinds.py): members are their words (they serialize as users see them),
and every failure kind has the label summaries print."""

from __future__ import annotations

import json

from kvtune.kinds import FAILURE_LABELS, Backend, Direction, FailureKind, KnobKind, ProgressMode, StrEnum


def test_members_compare_format_and_serialize_as_their_words():
    assert Direction.MAXIMIZE == "maximize" and str(Backend.LLAMA_SERVER) == "llama-server"
    assert f"{KnobKind.CHOICES}" == "choices"
    assert json.dumps({"kind": FailureKind.START_TIMEOUT}) == '{"kind": "start timed out"}'
    assert FailureKind("crashed") is FailureKind.CRASHED


def test_values_lists_the_words_in_order():
    assert ProgressMode.values() == ("auto", "plain", "quiet", "jsonl")
    assert Backend.values() == ("llama-server", "vllm")


def test_every_failure_kind_has_its_label():
    assert set(FAILURE_LABELS) == set(FailureKind)
    assert FailureKind.START_FAILED.label == "server failed to start"
    assert FailureKind.PRE_SCREEN.label == "pre-screen"


def test_a_str_enum_of_ones_own_is_a_str():
    class Colour(StrEnum):
        RED = "red"

    assert isinstance(Colour.RED, str) and Colour.RED.upper() == "RED" and Colour.values() == ("red",)
