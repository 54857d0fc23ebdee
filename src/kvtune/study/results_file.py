"""Reading results.json back (`kvtune show`, `report`, `export`, `compare`): the file kvtune wrote,
or one that was cut short, edited by hand, copied from another tool or garbled on the way. Its
bytes are UTF-8 text (a byte-order mark is skipped), its JSON a mapping of the shape kvtune
writes (study/results.py `study_results`): every key a reader takes is of the type it takes, and
every trial reads back as a `TrialOutcome` (study/outcome.py), each field of the type the
dataclass declares. A file that is not was an AttributeError or a TypeError from deep inside a
reader (after `show` had printed half its lines); here it is one line naming the file and the
key. NaN and Infinity, which kvtune never writes (jsonsafe.py writes null), read as null, as do
numbers too large for a float (1e999): what kvtune would have written for them.
"""

from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

from kvtune.errors import SpecError
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.readable import check_regular_file
from kvtune.study.outcome import TrialOutcome

# results.json's top-level keys the readers take, with their types (a key left out of a file
# written by an earlier version is fine; `study` and `trials` every version wrote).
TOP_KEYS: dict[str, Any] = {
    "study": str,
    "trials": list[dict],
    "spec": dict,
    "hardware": dict,
    "backend_version": str,
    "targets": list[str],
    "direction": str,
    "directions": list[str],
    "baseline_trial": int | None,
    "best_trial": int | None,
    "pareto_trials": list[int],
    "named_best": dict | None,
    "verdict": dict | None,
    "confirmation": dict | None,
    "importance": dict | None,
    "server_defaults": dict | None,
    "noise": dict | None,
    "budget": dict | None,
    "sentinel": dict | None,
    "early_stop": dict | None,
    "disturbed": list | None,
    "fidelity": dict | None,
    "cost_energy": dict | None,
    "nearest_misses": list | None,
    "time_spent": dict | None,
    "anchor": dict | None,
    "load_search": dict | None,
    "never_started": list[dict] | None,
    "what_would_work": dict | None,
    "best_argv": list[str],
    "best_command": str,
}
REQUIRED = ("study", "trials")
_CANDIDATE_KEYS = {f.name for f in fields(Candidate)}


def read_results(path: Path) -> dict[str, Any]:
    """results.json at `path` (an existing file), checked; SpecError in one line otherwise."""
    check_regular_file(path, str(path))
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SpecError(
            f"{path} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}): "
            "kvtune writes results.json as UTF-8; restore it or run the study again"
        ) from None
    try:
        data = json.loads(text, parse_constant=lambda _: None, parse_float=_finite_or_none)
    except ValueError as e:
        raise SpecError(f"{path} is not valid JSON: {e}") from e
    problem = shape_problem(data)
    if problem:
        raise SpecError(f"{path} is not a results.json kvtune wrote: {problem}; restore it or run the study again")
    return data


def _finite_or_none(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def shape_problem(data: Any) -> str | None:
    """What in `data` is not of the shape kvtune writes (the first thing found), else None."""
    if not isinstance(data, dict):
        return f"it holds {_kind(data)}, not a JSON object"
    for key in REQUIRED:
        if key not in data:
            return f"it has no {key!r}"
    for key, hint in TOP_KEYS.items():
        problem = _problem(data, key, hint)
        if problem:
            return problem
    for i, trial in enumerate(data["trials"]):
        problem = _trial_problem(trial)
        if problem:
            return f"trials[{i}]: {problem}"
    return None


def fields_problem(record: dict, cls: type) -> str | None:
    """What in `record` (a dataclass `cls` as JSON data, e.g. a stored StudySpec) is not of the
    type its field declares, the first found, else None: a field left out is not wrong, and a
    type no reader relies on (an enum, a tuple of parsed targets) is not looked at."""
    for key, hint in typing.get_type_hints(cls).items():
        problem = _problem(record, key, hint)
        if problem:
            return problem
    return None


def _trial_problem(trial: dict) -> str | None:
    if "number" not in trial:
        return "it has no 'number'"
    problem = fields_problem(trial, TrialOutcome)
    if problem:
        return problem
    if "failure" in trial and trial["failure"] not in (None, "", *(k.value for k in FailureKind)):
        return f"'failure' {trial['failure']!r} is no failure kind kvtune records"
    return None


def _problem(record: dict, key: str, hint: Any) -> str | None:
    """What is wrong with `record[key]` for the type `hint` (its first item that is not of the
    type, for a list or an object of items), else None (a key left out is not wrong)."""
    if key not in record or _fits(record[key], hint):
        return None
    value = record[key]
    origin = typing.get_origin(hint)
    if origin in (list, dict) and isinstance(value, origin):
        item = typing.get_args(hint)[-1]
        for k, v in enumerate(value) if origin is list else value.items():
            if not _fits(v, item):
                return f"{key}[{k!r}] is {_kind(v)}, not {_name(item)}"
    return f"{key!r} is {_kind(value)}, not {_name(hint)}"


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` (JSON data) is of the type `hint` (an annotation of the readers)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:  # a figure: null where it was not finite, a flag such as early_stopped
        return value is None or isinstance(value, (int, float))
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool):
        return isinstance(value, hint)
    if hint is Candidate:
        return (
            isinstance(value, dict)
            and set(value) <= _CANDIDATE_KEYS
            and all(isinstance(v, dict) for v in value.values())
        )
    if hint is FailureKind:
        return isinstance(value, str)
    if hint in (dict, list) or origin in (dict, list):
        container = origin or hint
        if not isinstance(value, container):
            return False
        args = typing.get_args(hint)
        if container is list and args:
            return all(_fits(v, args[0]) for v in value)
        if container is dict and args:
            return all(_fits(v, args[1]) for v in value.values())
        return True
    return True  # a type the readers do not rely on


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    return {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    ) + (f" {value!r}" if isinstance(value, (int, float, str)) and len(repr(value)) < 30 else "")


def _name(hint: Any) -> str:
    """`hint` in JSON's words: 'a list of strings', 'an object or null'."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_name(h) for h in typing.get_args(hint))
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint) or hint
    plain = {dict: "an object", list: "a list", str: "a string", int: "a whole number", float: "a number"}
    plain.update({bool: "true or false", Candidate: "an object of flags and env", FailureKind: "a string"})
    return plain.get(origin, getattr(origin, "__name__", str(origin)))
