"""How a setting is declared: once, on the field of the record that holds it.

A study's settings live on three records (`StudySpec`, its `Workload`, and the `RunOptions` of
where and how a run executes). Each field that a user may set carries a `Doc` in its metadata
(`setting(default, help=...)`): its help text, the study-file key when it differs from the field
name, and whether `kvtune run` / `kvtune bench` show it as a flag. Everything else is derived from
the field (kvtune/cli/settings.py): the study file's keys and type checks, `--set KEY=VALUE`,
the typer options of the front door, the refusal of a flag that moved to the study file,
`kvtune settings` and docs/reference.md. Adding a setting is one field.

A leaf module: the records sit on different layers (workload/ low, study/ and tuner/ above) and
all of them import this.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Doc:
    """What a field says about itself as a setting.

    `help`: one or two sentences for `kvtune settings`, docs/reference.md and the flag's help.
    `key`: the study-file key when it is not the field's name (`time_budget` for `time_budget_s`).
    `run_flag` / `bench_flag`: the option of `kvtune run` / `kvtune bench` that sets it, on the
    front door (None: a study-file key, set for one run with `--set KEY=VALUE`). `panel`: the
    help panel the flag shows in. `moved`: flags that set it before it became a study-file key;
    given now, each is refused in one line naming the key. `duration`: the value may be written
    as a duration ("30m", "90s") as well as a number of seconds. `what`: the expected value in a
    refusal ("a price in USD per hour, e.g. 2.5"), when the type's own word is not enough.
    `most`: the largest number taken. Far past what any study runs, a value is a slip (an extra
    zero, seconds written for milliseconds) that would otherwise start servers and hang or
    exhaust memory; it is refused when read, naming the key (or the flag typed).
    """

    help: str
    key: str | None = None
    run_flag: str | None = None
    bench_flag: str | None = None
    panel: str | None = None
    moved: tuple[str, ...] = ()
    duration: bool = False
    what: str | None = None
    most: float | None = None


def setting(default: Any = MISSING, *, default_factory: Any = MISSING, help: str, **doc: Any) -> Any:
    """A dataclass field that is a user-facing setting (see `Doc` for the keywords)."""
    meta = {"setting": Doc(help=help, **doc)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def doc_of(f: Any) -> Doc | None:
    """The `Doc` of a dataclass field, or None when the field is not a setting."""
    doc = f.metadata.get("setting")
    return doc if isinstance(doc, Doc) else None
