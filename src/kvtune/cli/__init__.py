"""The command line: parse flags into options, call library code, print. Thin by design.

One module per command group (run, bench, worker, confirm, plan, doctor, and the study readers show/report/
export); this package is the only code that writes to the console (with progress.py, the
console layer of a running study). Expected errors are `KvtuneError`s: `main` prints them as one
line and exits with their status (2).
"""

from __future__ import annotations

import sys
import unicodedata

# The commands register themselves on `app` when imported.
from kvtune.cli import bench, cluster, compare, confirm, doctor, plan, proxy, run, settings_list, study, worker  # noqa: E402,F401,I001 (help lists them in this order)
from kvtune.cli.app import app, console, err_console  # noqa: F401  (the package's API)


def main() -> None:
    """Console entry point. Expected errors are one line on stderr, `kvtune: error: ...`, and
    their exit status: a `KvtuneError` its own (2 bad input, 75 transient), a usage error click
    found while parsing any command's flags 2 (`usage_error_line`; typer's "Usage:" box never
    shows). `--help`, `--version` and a bare `kvtune` print help as before."""
    import typer

    from kvtune.cli.app import PROG, clickx, swallowed_value_line, usage_error_line
    from kvtune.env_settings import check_environment
    from kvtune.errors import EXIT_BAD_INPUT, KvtuneError

    swallowed = swallowed_value_line(sys.argv[1:])  # `--runs-dir --trials 3`, `-o=r.html`: no value
    if swallowed is not None:
        _refuse(swallowed, EXIT_BAD_INPUT)
    try:
        check_environment()  # a KVTUNE_*_S that is no number, refused before any command runs
        status = app(prog_name=PROG, standalone_mode=False)
    except clickx.NoArgsIsHelpError as e:  # bare `kvtune`: typer printed the help
        if e.format_message().strip():
            print(e.format_message())
        sys.exit(e.exit_code)
    except clickx.UsageError as e:
        _refuse(usage_error_line(e, sys.argv[1:]), EXIT_BAD_INPUT)
    except clickx.ClickException as e:  # a file click could not open, say
        _refuse(" ".join(e.format_message().split()), e.exit_code)
    except typer.Abort:  # end of input at a prompt
        _refuse("aborted", 1)
    except KvtuneError as e:
        _refuse(str(e), e.exit_code)
    # Not standalone, click returns what `typer.Exit(n)` carried (the command's status) or
    # the command's own return value (None: done).
    sys.exit(status if isinstance(status, int) else 0)


def _refuse(line: str, status: int) -> None:
    """Print `kvtune: error: LINE` on stderr and exit with `status`. One line whatever it
    quotes: a value typed with a newline (`--study $'a\\nb'`) echoed raw split the refusal in
    two; control characters are shown escaped (`\\n`), as repr shows them."""
    line = "".join(repr(ch)[1:-1] if unicodedata.category(ch) == "Cc" else ch for ch in line)
    err_console.print(f"kvtune: error: {line}", markup=False, soft_wrap=True, highlight=False)
    sys.exit(status)
