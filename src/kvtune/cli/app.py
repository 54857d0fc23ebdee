"""The typer application and the two consoles every command prints to. The command modules
register themselves on `app` (cli/__init__.py imports them), so this module imports none of them."""

from __future__ import annotations

import importlib
import re
from typing import Any

import typer

from kvtune.cli.consoles import make_console

#: The program's name in messages and help, however it was started (`python -m kvtune.cli`).
PROG = "kvtune"
#: click's exceptions as this typer raises them: click's own, or the copy of click that typer
#: 0.20 and later vendor (typer.BadParameter is one of them either way).
clickx: Any = importlib.import_module(typer.BadParameter.__module__)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="kvtune: find the best serving flags for your model on your hardware.",
)
console = make_console()
err_console = make_console(stderr=True)


def say_wait(line: str) -> None:
    """A wait before a command's own output begins (a storage slow to answer: every command
    that opens one passes this to it), on stderr: a refusal may still follow it."""
    err_console.print(f"kvtune: {line}", markup=False, highlight=False)


def _print_version(value: bool) -> None:
    if value:
        from kvtune import __version__

        print(f"kvtune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print kvtune's version and exit."
    ),
) -> None:
    """kvtune: find the best serving flags for your model on your hardware."""


def usage_error_line(e: Exception, argv: list[str]) -> str:
    """A click usage error (unknown option, bad value, missing argument, unknown command) as
    kvtune's one line, `<what was wrong>; <the fix>`, instead of typer's multi-line "Usage:" box:
    every command's parsing errors pass through here (`kvtune.cli.main`; `argv`: the arguments
    after `kvtune`, which name the command when click's error does not carry it)."""
    where = _command_path(getattr(e, "ctx", None), argv)
    fix = f"see {where} --help"
    moved = _moved(e)
    if moved is not None:
        return moved
    if isinstance(e, clickx.NoSuchOption):
        what = f"no such option {e.option_name}"
        if e.possibilities:
            fix = f"did you mean {' or '.join(e.possibilities)}? ({fix})"
    elif isinstance(e, clickx.MissingParameter) and e.param is not None:
        what = re.sub(r" \(env var: [^)]*\)", "", _sentence(e.format_message()))
        envvar = getattr(e.param, "envvar", None)
        if isinstance(envvar, str):
            fix = f"give it, or set {envvar} ({fix})"
    else:
        what = _sentence(e.format_message())  # type: ignore[attr-defined]
        what, _, suggestion = what.partition(". Did you mean ")  # an unknown command
        if suggestion:
            fix = f"did you mean {suggestion.rstrip('.')} ({fix})"
        rejected = _type_refusal(e)
        if rejected is not None:
            what = rejected
    return f"{what}; {fix}" if where == PROG else f"{where}: {what}; {fix}"


def _moved(e: Exception) -> str | None:
    """A flag that became a study-file key, refused with the key to give instead:
    `--num-requests is a study-file key now: --set workload.num_requests=VALUE (...)`."""
    if not isinstance(e, clickx.NoSuchOption):
        return None
    from kvtune.study.settings import moved_flag, set_hint

    flag = str(e.option_name).partition("=")[0]
    s = moved_flag(flag)
    if s is None:
        return None
    section = "under `workload:` " if s.section == "workload" else ""
    return (
        f"{flag} is a study-file key now: {set_hint(s, flag)} "
        f"(or `{s.name}:` {section}in a --study-file; `kvtune settings` lists every key)"
    )


def _command_path(ctx: Any, argv: list[str]) -> str:
    """`kvtune CMD` for the error's context, else the first registered command `argv` names
    (an option missing its value is reported without a context)."""
    if ctx is not None:
        return str(ctx.command_path)
    names = {c.name or (c.callback.__name__ if c.callback else "").replace("_", "-") for c in app.registered_commands}
    command = next((a for a in argv if a in names), None)
    return f"{PROG} {command}" if command else PROG


#: What a pydantic type error (typer 0.20 and later check types with pydantic) expected.
_EXPECTED = {
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "int_type": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
}


def _type_refusal(e: Exception) -> str | None:
    """`--trials takes a whole number, got 'abc'` for a value of the wrong type; None when
    click's own message is kept. Pydantic's message ("Input should be a valid integer, unable
    to parse string as an integer") leaves out the value, which is the validation error's input."""
    errors = getattr(e.__cause__, "errors", None)
    param = getattr(e, "param", None)
    found = errors() if callable(errors) else []
    if not found or param is None:
        return None
    first = found[0]
    expected = _EXPECTED.get(first.get("type", "")) or str(first.get("msg", "")).removeprefix("Input should be ")
    flags = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    name = max(flags, key=len) if flags else str(param.name).upper()
    return f"{name} takes {expected}, got {first.get('input')!r}"


def _sentence(message: str) -> str:
    """Click's message as a clause of kvtune's line: one line, no capital, no full stop, flags
    unquoted ("Invalid value for '--trials'" -> "invalid value for --trials")."""
    text = " ".join(message.split()).rstrip(".")
    text = re.sub(r"'(-{1,2}[\w-]+)'", r"\1", text)
    return text[:1].lower() + text[1:]


#: Options whose value is itself a flag by design (`--worker-arg=--llama-server=/opt/llama-server`).
FLAG_VALUED = {"--worker-arg"}


def swallowed_value_line(argv: list[str]) -> str | None:
    """A value that is a slip of the keyboard, not a value: one that starts with '--' (`--runs-dir
    --trials 3`: click hands the next flag to an option as its value, and kvtune made a folder
    `--trials`), or with '=' (`--runs-dir==x`, `-o=report.html`: a folder `=x`, a file
    `=report.html`). One line naming the option typed and how to give its value; None when
    `argv` (the arguments after `kvtune`) holds none. Negative numbers (`--rate -2`) pass, for
    their own refusal; options of `FLAG_VALUED` take flags as values."""
    group: Any = typer.main.get_command(app)
    command = group.commands.get(argv[0]) if argv and hasattr(group, "commands") else None
    if command is None:
        return None
    takes_value = {
        name: param
        for param in command.params
        if getattr(param, "param_type_name", "") == "option" and not param.is_flag and not param.count
        for name in param.opts
    }
    words = argv[1:]
    for i, word in enumerate(words):
        if word == "--":
            break
        given = _option_value(word, words[i + 1] if i + 1 < len(words) else None, takes_value)
        if given is None or given[0] in FLAG_VALUED:
            continue
        name, value = given
        if value.startswith("--"):
            return (
                f"{name} took {value!r} as its value, which is a flag: give {name} its value "
                f"(a path that starts with -- as ./{value})"
            )
        if value.startswith("="):
            rest = value[1:].strip()
            written = f"{name} {rest}" + (f" or {name}={rest}" if name.startswith("--") else "")  # -o=x is -o '=x'
            return f"{name} {value!r} starts with '=': " + (f"write {written}" if rest else f"give {name} a value")
    return None


def _option_value(word: str, following: str | None, takes_value: dict[str, Any]) -> tuple[str, str] | None:
    """(option, value) when `word` is an option of `takes_value` with its value: `--opt=VALUE`,
    `-oVALUE` (`-o=x`: '=x'), or `--opt` / `-o` with `following` as the value; else None."""
    if word.startswith("--"):
        name, eq, value = word.partition("=")
        if name in takes_value:
            return (name, value) if eq else (None if following is None else (name, following))
        return None
    if word.startswith("-") and word[:2] in takes_value:
        return (word[:2], word[2:]) if len(word) > 2 else (None if following is None else (word[:2], following))
    return None
