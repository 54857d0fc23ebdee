"""The command line: parse flags into options, call library code, print. Thin by design.

One module per command group (run, bench, worker, plan, doctor, and the study readers show/report/
export); this package is the only code that writes to the console (with progress.py, the
console layer of a running study). Expected errors are `KvtuneError`s: `main` prints them as one
line and exits with their status (2).
"""

from __future__ import annotations

import sys

# The commands register themselves on `app` when imported.
from kvtune.cli import bench, cluster, compare, doctor, plan, proxy, run, study, worker  # noqa: E402,F401,I001 (help lists them in this order)
from kvtune.cli.app import app, console, err_console  # noqa: F401  (the package's API)


def main() -> None:
    """Console entry point: expected errors are one line on stderr and exit status 2."""
    from kvtune.errors import KvtuneError

    try:
        app()
    except KvtuneError as e:
        err_console.print(f"kvtune: error: {e}", markup=False, soft_wrap=True)
        sys.exit(e.exit_code)
