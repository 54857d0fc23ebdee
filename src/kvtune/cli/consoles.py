"""The consoles kvtune prints through. Rich sizes its tables to the terminal; into a file, a pipe
or a CI log it assumes 80 columns, and a wide table (the side-by-side of backends, best vs
baseline) wraps every cell over several lines. Off a terminal kvtune uses 160 columns unless
COLUMNS says otherwise."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

OFF_TERMINAL_WIDTH = 160


def make_console(**kwargs: Any) -> Console:
    console = Console(highlight=False, soft_wrap=True, **kwargs)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = OFF_TERMINAL_WIDTH
    return console
