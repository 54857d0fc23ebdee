"""Every setting of a study, collected from the fields that declare them (kvtune/setting.py).

Three records hold them: `StudySpec` (what the study is), its `Workload` (the load of a run, the
study file's `workload:` keys) and `RunSettings` (where and how it runs). A study-file key, a
`--set KEY=VALUE`, a flag of the front door and a line of docs/reference.md are four spellings of
one field; this module turns each into the others, and checks a value by the field's type, so a
value is checked the same way whichever way it came.
"""

from __future__ import annotations

import difflib
import enum
import functools
import math
import types
import typing
import unicodedata
from dataclasses import MISSING, dataclass, fields
from typing import Any, Mapping

import yaml

from kvtune.durations import parse_duration
from kvtune.errors import SpecError
from kvtune.setting import Doc, doc_of
from kvtune.study.run_settings import RunSettings
from kvtune.study.space import check_type
from kvtune.study.spec import StudySpec
from kvtune.workload import Workload

#: The sections of a study file, by the record that holds them.
SECTIONS: tuple[tuple[str, type], ...] = (("study", StudySpec), ("workload", Workload), ("run", RunSettings))


@dataclass(frozen=True)
class Setting:
    """One setting: where it lives (`section`, `field`), how users write it (`key`: the study
    file's, `workload.` first for a workload key), its type, default and documentation."""

    section: str
    field: str
    key: str
    hint: Any
    default: Any
    doc: Doc

    @property
    def name(self) -> str:
        """The key inside its section (`num_requests` for `workload.num_requests`)."""
        return self.key.rpartition(".")[2]

    @property
    def expected(self) -> str:
        """The value expected, in a refusal's words."""
        if self.doc.what:
            return self.doc.what
        kinds = _kinds(self.hint)
        if self.doc.duration:
            return "a duration such as 90s, 30m or 2h, or a number of seconds"
        return _WORDS.get(kinds, "a value")

    @property
    def type_name(self) -> str:
        """The type as docs/reference.md and `kvtune settings` show it."""
        if self.doc.duration:
            return "duration" + self._at_most
        names = {int: "integer", float: "number", bool: "true/false", str: "string"}
        kinds = _kinds(self.hint)
        if kinds == (int, str):
            return "integer or auto" + self._at_most
        if _is_list(self.hint):
            return "list of strings"
        return (names.get(kinds[-1], "string") if kinds else "string") + self._at_most

    @property
    def _at_most(self) -> str:
        most = self.doc.most
        if most is None:
            return ""
        return f", at most {_number(most)}{'s' if self.doc.duration else ''}"

    def check(self, value: Any) -> Any:
        """`value` as the study file or `--set` gave it, typed (a duration's words in seconds),
        else a one-line SpecError naming the key and what it takes. None: not set."""
        if value is None:
            return None
        if _is_list(self.hint):
            items = [value] if isinstance(value, str) else value
            if not (isinstance(items, list) and all(isinstance(x, str) for x in items)):
                raise SpecError(f"{self.key} must be {self.expected}, got {value!r}")
            for item in items:
                if not item.strip():
                    raise SpecError(f"{self.key} has an empty item: give {self.expected}, or leave it out")
                self._text(item)
            return items
        if isinstance(value, str) and not value.strip():
            raise SpecError(f"{self.key} is empty: give {self.expected}, or leave it out")
        if isinstance(value, str):
            self._text(value)
        if self.doc.duration and isinstance(value, str):
            return self._within_most(parse_duration(value, what=self.key, zero_ok=True))
        allowed = _kinds(self.hint) + ((int, float) if self.doc.duration else ())
        check_type(self.key, value, allowed or (str,), self.expected)
        return self._within_most(value)

    def _text(self, value: str) -> None:
        """A string value must be plain text (`not_plain_text`)."""
        problem = not_plain_text(value)
        if problem:
            raise SpecError(f"{self.key} holds {problem}: retype it as plain text")

    def _within_most(self, value: Any) -> Any:
        """`value`, unless it is a number past the declared most (`Doc.most`)."""
        most = self.doc.most
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if most is not None and number and math.isfinite(value) and value > most:  # inf: the type's own check
            unit = " s" if self.doc.duration else ""
            raise SpecError(f"{self.key} must be at most {_number(most)}{unit}, got {_number(value)}{unit}")
        return value


def _number(x: float) -> str:
    """A number as a refusal writes it: whole numbers without a point, others as typed."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e18 else f"{x:g}"


_WORDS: dict[tuple[type, ...], str] = {
    (int,): "an integer",
    (int, float): "a number",
    (float,): "a number",
    (bool,): "true or false",
    (str,): "a string",
    (int, str): "an integer or 'auto'",
}


def _kinds(hint: Any) -> tuple[type, ...]:
    """The plain types a value of `hint` may have in YAML (None apart; an enum or a parsed
    type such as `Slo` is written as a string)."""
    args = typing.get_args(hint) if _is_union(hint) else (hint,)
    out: list[type] = []
    for a in args:
        if a is type(None):
            continue
        if a is float:
            out += [int, float]
        elif a in (int, bool, str):
            out.append(a)
        elif isinstance(a, type) and issubclass(a, enum.Enum):
            out.append(str)
        elif typing.get_origin(a) in (tuple, list):
            out.append(list)
        else:
            out.append(str)
    return tuple(dict.fromkeys(out))


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _is_list(hint: Any) -> bool:
    return typing.get_origin(hint) in (tuple, list)


@functools.cache
def all_settings() -> tuple[Setting, ...]:
    """Every declared setting, in the records' order (study, workload, run)."""
    out = []
    for section, record in SECTIONS:
        hints = typing.get_type_hints(record)
        for f in fields(record):
            doc = doc_of(f)
            if doc is None:
                continue
            key = doc.key or f.name
            default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[operator]
            out.append(
                Setting(
                    section, f.name, f"workload.{key}" if section == "workload" else key, hints[f.name], default, doc
                )
            )
    return tuple(out)


def by_key() -> dict[str, Setting]:
    return {s.key: s for s in all_settings()}


def of_field(section: str, name: str) -> Setting:
    """The setting of a record's field."""
    for s in all_settings():
        if s.section == section and s.field == name:
            return s
    raise KeyError(f"{section}.{name}")


def moved_flag(flag: str) -> Setting | None:
    """The setting a flag of an earlier command line set (`--num-requests`), None if none."""
    for s in all_settings():
        if flag in s.doc.moved:
            return s
    return None


def set_hint(s: Setting, flag: str = "") -> str:
    """How to give `s` now: `--set workload.num_requests=VALUE`, with the value a negative
    flag meant (`--no-fidelity-gate` -> `--set fidelity_gate=false`)."""
    if _kinds(s.hint) == (bool,):
        value = "false" if flag.startswith("--no-") else "true"
    else:
        value = "VALUE"
    return f"--set {s.key}={value}"


#: Study-file keys that are not single settings: the search space and the workload's section.
SECTION_KEYS = ("workload", "space")


def top_keys() -> set[str]:
    """The keys a study file may have at its top."""
    return {s.key for s in all_settings() if s.section != "workload"} | set(SECTION_KEYS)


def read_section(raw: Mapping[str, Any], section: str, where: str) -> dict[str, Any]:
    """A study file's mapping of one section (its top: "study" and "run" keys; `workload:`),
    each value checked by its setting -> {field name: typed value}. Unknown keys are one line
    listing the allowed ones."""
    mine = [s for s in all_settings() if (s.section == "workload") == (section == "workload")]
    known = {s.name if section == "workload" else s.key: s for s in mine}
    unknown = set(raw) - set(known) - (set() if section == "workload" else set(SECTION_KEYS))
    if unknown:
        allowed = sorted(known) + ([] if section == "workload" else list(SECTION_KEYS))
        raise SpecError(f"{where} has unknown key(s) {sorted(map(str, unknown))}; allowed: {', '.join(allowed)}")
    return {known[k].field: known[k].check(v) for k, v in raw.items() if k in known and v is not None}


def parse_sets(texts: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`--set KEY=VALUE` items -> the study file's shape (`workload` a mapping of its own), by
    field name, each value read as YAML reads it (`16`, `true`, `[1, 2]`, `30m`) and checked by
    its setting. `space.FLAG=VALUE` narrows one knob as the study file's `space:` does."""
    top: dict[str, Any] = {}
    workload: dict[str, Any] = {}
    space: dict[str, Any] = {}
    known = by_key()
    given: dict[str, tuple[str, Any]] = {}  # the setting's key -> (the text that gave it, its value)
    for text in texts:
        key, eq, raw = text.partition("=")
        key = key.strip()
        if not eq or not key:
            raise SpecError(f"--set {text!r} is not KEY=VALUE, e.g. --set workload.num_requests=16")
        value = _yaml_value(key, raw)
        if key.startswith("space.") and len(key) > len("space."):
            _once(given, key, text, value)
            space[key[len("space.") :]] = value
            continue
        s = known.get(key) or known.get(f"workload.{key}")
        if s is None or key in SECTION_KEYS:
            near = difflib.get_close_matches(key, list(known), n=2)
            hint = f"did you mean {' or '.join(near)}? " if near else ""
            raise SpecError(f"--set {key}: no such setting; {hint}`kvtune settings` lists them all")
        _once(given, s.key, text, value)
        (workload if s.section == "workload" else top)[s.field] = s.check(value)
    return {**top, **({"workload": workload} if workload else {}), **({"space": space} if space else {})}


def _once(given: dict[str, tuple[str, Any]], key: str, text: str, value: Any) -> None:
    """A setting `--set` twice with two values is one line: the last silently won (`--set seed=1
    --set seed=2`, or `seed=1` with `workload.seed=2`). The same value twice is what was meant."""
    first = given.setdefault(key, (text, value))
    if repr(first[1]) != repr(value):  # repr: nan is nan here, as it is not under ==
        raise SpecError(f"--set {first[0]!r} and --set {text!r} give {key} two values: give it once")


def _yaml_value(key: str, raw: str) -> Any:
    """A `--set` value as a study file would hold it; unreadable YAML is the text itself."""
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        return raw
    if value is None:
        raise SpecError(f"--set {key}= has no value: give one, e.g. --set {key}=VALUE, or leave it out")
    return value


def run_values(data: Mapping[str, Any]) -> dict[str, Any]:
    """The run settings among a study file's (or `--set`'s) values, by field name."""
    names = {s.field for s in all_settings() if s.section == "run"}
    return {k: v for k, v in data.items() if k in names}


def not_plain_text(value: str) -> str | None:
    """What makes `value` no plain text, with where ("a control character (U+000A) at character
    3"), or None. A byte that was not UTF-8 (the command line hands it on as a lone surrogate) or
    a control character (a newline, a NUL from a YAML escape) would reach a path, a request
    header, a server's argv or a generated script, and fail there, after the work began. The
    settings (`Setting`) and the flags of words (cli/flag_values.py `plain_text`) refuse by it."""
    for i, ch in enumerate(value):
        if "\udc80" <= ch <= "\udcff":
            return f"a byte that is not UTF-8 (0x{ord(ch) - 0xDC00:02x}) at character {i + 1}"
        if unicodedata.category(ch) in ("Cc", "Cs"):
            return f"a control character (U+{ord(ch):04X}) at character {i + 1}"
    return None
