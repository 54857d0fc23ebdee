"""Which flag the user typed, for a refusal: the spec and workload checks name the study file's
key (`workload.output_tokens must be at least 1`), which is right for a value the study file
gave and puzzling for one typed as `--output-tokens -64`. `cli/run.py` builds the spec once
before anything starts and, when its refusal opens with a key a flag set, opens it with that
flag instead (`named_by_flag`). The flag of a record's field comes from its typer option
(`flag_of`), so a renamed flag cannot drift from its refusals."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Mapping

from kvtune.study.overrides import SpecOverrides

#: Spec and workload fields set by a flag of another name (cli/run.py `spec_overrides`,
#: `workload_overrides`); every other field is set by the flag of its own name.
KEY_FLAGS: dict[str, str] = {
    "targets": "--target",
    "time_budget_s": "--time-budget",
    "startup_timeout_s": "--startup-timeout",
    "startup_stall_s": "--startup-stall",
    "shared_prefix_groups": "--prefix-groups",
    "trace": "--workload",
    "multiturn": "--workload",
    "mode": "--rate",
    "trace_window_s": "--trace-window",
    "think_time_s": "--think-time",
}
_KEY = re.compile(r"(?:workload\.)?\w+")


def flag_of(record: type, name: str) -> str:
    """The long option of `record`'s field `name` (its first declared name, or the field's
    name in dashes)."""
    for f in fields(record):
        if f.name == name:
            decls = [d for d in getattr(f.metadata.get("flag"), "param_decls", ()) if d.startswith("--")]
            return decls[0].split("/")[0] if decls else "--" + name.replace("_", "-")
    raise KeyError(name)


def flags_given(overrides: SpecOverrides) -> dict[str, str]:
    """Spec key as the refusals write it (`trials`, `workload.output_tokens`) -> the flag that
    gave its value, for the keys the flags set. `--seed` seeds the prompts too."""
    keys = {name: name for name in overrides.given()}
    workload = overrides.workload.given()
    keys.update({f"workload.{name}": name for name in workload})
    if overrides.seed is not None and "seed" not in workload:
        keys["workload.seed"] = "seed"
    return {key: KEY_FLAGS.get(name, "--" + name.replace("_", "-")) for key, name in keys.items()}


def named_by_flag(line: str, flags: Mapping[str, str]) -> str:
    """`line` opened with the flag the user typed when it opens with a key in `flags`
    (`workload.output_tokens must be ...` -> `--output-tokens must be ...`); else `line`."""
    m = _KEY.match(line)
    if m is None or m.group(0) not in flags or line[m.end() : m.end() + 1] not in ("", " ", ":", ","):
        return line
    return flags[m.group(0)] + line[m.end() :]
