"""A command's flags as a typed, immutable record: each field of a dataclass carries its typer
option (`opt`) or argument (`arg`) in its metadata, and `command_signature` turns the fields into
the signature typer reads. The flag list is written once (cli/run_flags.py, cli/bench_flags.py);
the command functions stay a few lines, taking the record."""

from __future__ import annotations

import inspect
import typing
from dataclasses import field, fields
from typing import Any, TypeVar

import typer

R = TypeVar("R")


def opt(default: Any, *names: str, **settings: Any) -> Any:
    """A record field that is the typer option `typer.Option(default, *names, **settings)`."""
    return field(metadata={"flag": typer.Option(default, *names, **settings)})


def arg(default: Any, **settings: Any) -> Any:
    """A record field that is the positional typer argument `typer.Argument(default, **settings)`."""
    return field(metadata={"flag": typer.Argument(default, **settings)})


def with_defaults(record: type[R], **given: Any) -> R:
    """The record as typer fills it when only `given` is on the command line (tests, and callers
    that build a command's flags without a command line)."""
    values = {f.name: f.metadata["flag"].default for f in fields(record)}  # type: ignore[arg-type]
    return record(**{**values, **given})


def command_signature(record: type) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature and annotations typer reads from a command function, made from the fields
    of `record`: the command takes them as keywords, in the record's order."""
    hints = typing.get_type_hints(record)
    params = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.metadata["flag"], annotation=hints[f.name])
        for f in fields(record)
    ]
    annotations = {**{p.name: p.annotation for p in params}, "return": None}
    return inspect.Signature(params, return_annotation=None), annotations


def from_setting(
    section: str, name: str, default: Any = None, *short: str, command: str = "run", envvar: str | None = None
) -> Any:
    """A record field that is the flag of a declared setting (kvtune/setting.py): its name,
    help and panel come from the declaration, with the setting's default said in the help.
    `default`: what typer fills when the flag is not given (None: not given); `envvar`: the
    environment variable read when the flag is not given (a secret kept out of argv)."""
    from kvtune.study.settings import of_field

    s = of_field(section, name)
    flag = s.doc.run_flag if command == "run" else s.doc.bench_flag
    if flag is None:
        raise ValueError(f"{s.key} is not a flag of kvtune {command}")
    shown = s.default not in (None, (), False, "") and not s.doc.duration
    text = s.doc.help + (f" (default {_shown(s.default)})" if shown else "")
    panel = s.doc.panel if command == "run" else None
    if envvar:
        text += f"; or set {envvar}"
    option = typer.Option(default, flag, *short, help=text, rich_help_panel=panel, show_default=False, envvar=envvar)
    return field(metadata={"flag": option, "setting": (section, name)})


def _shown(value: Any) -> str:
    """A default as the help shows it: a tuple of names as the names."""
    if isinstance(value, tuple):
        return ", ".join(map(str, value))
    return str(getattr(value, "value", value))
