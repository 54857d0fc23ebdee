"""One parse of a GGUF file per process.

`gguf.GGUFReader` parses the whole header and vocabulary (about 2 s for the demo model), and a
study needs it twice at start-up: the planner reads the model's shape for the KV pre-screen and
the load client reads the vocabulary for exact prompt lengths. Both go through here, so the
file is parsed once. The cache key includes size and modification time, so a replaced file is
read again. It is also where "is this a GGUF file?" is answered (`is_gguf`, the magic bytes),
for the model resolver, the planner and the tokenizer loader alike.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from kvtune.errors import ModelError

GGUF_MAGIC = b"GGUF"


def is_gguf(path: str | Path) -> bool:
    """The file starts with GGUF's magic bytes (whatever its name). OSError when it cannot be
    read: each caller words that for its own error kind."""
    with open(path, "rb") as f:
        return f.read(4) == GGUF_MAGIC


def read_gguf(path: str | Path, name: str | None = None) -> Any:
    """The file's `gguf.GGUFReader` (ImportError without the gguf package, OSError when it
    cannot be opened). A file the reader cannot parse (cut short or damaged: the reader's own
    IndexError, ValueError, struct errors) is a one-line `ModelError` that names it as `name`
    (e.g. "--model 'x.gguf'"; default: its path)."""
    p = Path(path).resolve()
    st = os.stat(p)
    try:
        return _read(str(p), st.st_size, st.st_mtime_ns)
    except _Unreadable as e:
        raise ModelError(
            f"{name or p} is not a readable GGUF file ({st.st_size} bytes, cut short or damaged: "
            f"{e}): download or convert it again"
        ) from e.__cause__


class _Unreadable(Exception):
    pass


@functools.lru_cache(maxsize=4)
def _read(path: str, size: int, mtime_ns: int) -> Any:
    from gguf import GGUFReader

    try:
        return GGUFReader(path)
    except OSError:
        raise
    except Exception as e:  # whatever the reader trips on in a file cut short or damaged
        raise _Unreadable(type(e).__name__) from e
