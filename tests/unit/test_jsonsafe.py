"""JSON any tool can read (jsonsafe.py): non-finite floats become null, enums their words,
objects their `to_dict()` (dataclasses their fields), keys strings, and `dumps` never writes
NaN or Infinity."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from kvtune.jsonsafe import dumps, to_jsonable
from kvtune.kinds import Direction, FailureKind


@dataclass
class Point:
    x: float
    tags: tuple[str, ...] = ()


class Reported:
    def to_dict(self) -> dict:
        return {"p99": math.inf, "kind": FailureKind.CRASHED}


def test_non_finite_floats_become_null_and_finite_ones_stay():
    assert to_jsonable([1.5, math.inf, -math.inf, math.nan, 0.0]) == [1.5, None, None, None, 0.0]


def test_scalars_keep_their_type_and_enums_become_their_words():
    assert to_jsonable(True) is True and to_jsonable(None) is None and to_jsonable(3) == 3 and to_jsonable("s") == "s"
    assert to_jsonable(Direction.MAXIMIZE) == "maximize"


def test_containers_become_lists_and_dicts_with_string_keys():
    assert to_jsonable((1, 2)) == [1, 2] and to_jsonable(frozenset({3})) == [3]
    assert to_jsonable({1: "a", Direction.MINIMIZE: math.nan}) == {"1": "a", "minimize": None}


def test_objects_become_their_to_dict_or_their_dataclass_fields_else_their_text():
    assert to_jsonable(Reported()) == {"p99": None, "kind": "crashed"}
    assert to_jsonable(Point(math.nan, ("a",))) == {"x": None, "tags": ["a"]}
    assert to_jsonable(Path("/tmp/x")) == "/tmp/x"
    assert to_jsonable(Point) == str(Point)  # a class is not an instance: its text


def test_dumps_is_standard_json():
    text = dumps({"a": [math.inf, 1.0], "b": Reported()}, sort_keys=True)
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text) == {"a": [None, 1.0], "b": {"kind": "crashed", "p99": None}}
