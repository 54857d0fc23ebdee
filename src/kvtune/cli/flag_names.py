"""Which flag the user typed, for a refusal: the spec and workload checks name the study file's
key (`workload.output_tokens must be at least 1`), which is right for a value the study file
gave and puzzling for one typed as `--output-tokens -64`. `cli/run.py` builds the spec once
before anything starts and, when its refusal opens with a key a flag set, opens it with that
flag instead (`named_by_flag`). The flag of a record's field comes from its typer option
(`flag_of`), so a renamed flag cannot drift from its refusals."""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, Iterator, Mapping

from kvtune.errors import KvtuneError, ServerNotFoundError
from kvtune.launchers.llama_binary import find_llama_server, installed_help, named_as
from kvtune.launchers.vllm.installed import has_vllm
from kvtune.study.settings import by_key

#: Settings set by a flag that is not their own (cli/run.py `given_by_flags`).
KEY_FLAGS: dict[str, str] = {
    "backend": "--backend",
    "workload.trace": "--workload",
    "workload.multiturn": "--workload",
    "workload.mode": "--rate",
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


def flags_given(by_flags: Mapping[str, Any]) -> dict[str, str]:
    """Setting key as the refusals write it (`trials`, `time_budget`, `workload.output_tokens`)
    -> the flag that gave its value, for the settings the flags gave (the study file's shape,
    by field name: cli/run.py `given_by_flags`)."""
    settings = {(s.section == "workload", s.field): s for s in by_key().values()}
    out: dict[str, str] = {}
    for section, values in (("top", by_flags), ("workload", by_flags.get("workload") or {})):
        for name in values:
            if name == "workload":
                continue
            s = settings.get((section == "workload", name))
            key = s.key if s is not None else f"workload.{name}" if section == "workload" else name
            flag = KEY_FLAGS.get(key) or (s.doc.run_flag if s is not None else None)
            if flag:
                out[key] = flag
    return out


def named_by_flag(line: str, flags: Mapping[str, str]) -> str:
    """`line` opened with the flag the user typed when it opens with a key in `flags`
    (`workload.output_tokens must be ...` -> `--output-tokens must be ...`); else `line`."""
    m = _KEY.match(line)
    if m is None or m.group(0) not in flags or line[m.end() : m.end() + 1] not in ("", " ", ":", ","):
        return line
    return flags[m.group(0)] + line[m.end() :]


@contextmanager
def refused_as_typed(flags: Mapping[str, str], *kinds: type[KvtuneError]) -> Iterator[None]:
    """A refusal of `kinds` raised inside, opened with the flag the user typed when it opens with
    a key in `flags` (`named_by_flag`), as the same error (so the same exit status). For values
    read after the flags were checked: the model is read when its launcher is built."""
    try:
        yield
    except kinds as e:
        line = named_by_flag(str(e), flags)
        if line == str(e):
            raise
        raise type(e)(line) from e


def check_llama_server_flag(path: str | None) -> None:
    """A `--llama-server` a command was given (`kvtune worker`, `confirm`, `doctor`), checked
    before the storage is opened or a study read: a path that is not an executable file, or a
    program that is not llama-server, is refused in one line that opens with the flag typed
    (the launcher, built later, would name the study's key `llama_server`); the fix names no
    other way in, so it follows the flag too."""
    if path is None:
        return
    with refused_as_typed({"llama_server": "--llama-server"}, ServerNotFoundError):
        installed_help(find_llama_server(path), named_as(path))


def check_vllm_python_flag(path: str | None) -> None:
    """A `--vllm-python` `kvtune worker` or `confirm` was given, checked with `--llama-server`
    and for the same reason: an empty one, one that cannot run or has no vLLM is refused in one
    line that opens with the flag typed, before the storage is opened (confirm would otherwise
    say 'no measured trial' of a study its workers have not started, and hide it). The probe
    imports vLLM in that interpreter (seconds; a CPU build's answer is kept on disk), once per
    process: the launcher built later reads the same answer."""
    if path is None:
        return
    with refused_as_typed({"vllm_python": "--vllm-python"}, ServerNotFoundError):
        has_vllm(path)
