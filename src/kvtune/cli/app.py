"""The typer application and the two consoles every command prints to. The command modules
register themselves on `app` (cli/__init__.py imports them), so this module imports none of them."""

from __future__ import annotations

import typer

from kvtune.cli.consoles import make_console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="kvtune: find the best serving flags for your model on your hardware.",
)
console = make_console()
err_console = make_console(stderr=True)


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
