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
