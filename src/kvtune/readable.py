"""Files kvtune reads, checked for being files before they are opened: a study file, a dataset,
a trace, reference prompts, a model, a results.json. A named pipe given as one blocked the open
until something wrote into it (forever, for a user who typed the wrong path), and a device such
as /dev/zero never ends, so a reader ate memory until it was killed; a socket cannot be opened
at all. Each is one line here, naming the path as it was given and what it is, before anything
is read. A path that does not exist or is a folder is left to the reader, which names the
missing file or the folder in its own words (the `stat` here never blocks, whatever the path is).
The pseudo-file /dev/null is refused too: it reads as empty, which a reader would take as a file
with nothing in it (an empty study file meaning every default) rather than a mistyped path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kvtune.errors import KvtuneError, SpecError

# What a path that is neither a regular file nor a folder is, in the words a refusal uses.
_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_kind(path: str | Path) -> str | None:
    """What `path` is when it exists and is neither a regular file nor a folder (a named pipe, a
    device, a socket; a link is followed), else None."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a link loop, a NUL in the name: the reader says so
        return None
    return next((kind for test, kind in _KINDS if test(mode)), None)


def check_regular_file(path: str | Path, name: str) -> None:
    """`SpecError` when `path` is a named pipe, a device or a socket: `name` says what it was
    given as, e.g. "study file 'x.yaml'" or "--model '/dev/zero'"."""
    check_name_lengths(path, name)
    kind = special_kind(path)
    if kind is not None:
        raise SpecError(f"{name} is {kind}, not a file: give the path of a regular file")


#: The longest name of one file or folder Linux file systems take (ext4, xfs, btrfs, tmpfs), in bytes.
NAME_MAX = 255


def check_name_lengths(path: str | Path, name: str, error: type[KvtuneError] = SpecError) -> None:
    """`error` when a name in `path` is longer than a file system takes: pathlib's
    `exists()`, `is_file()` and `is_dir()` raise OSError (File name too long) rather than answer,
    which was a traceback wherever a path is checked. Pure: no file system call."""
    for part in Path(path).parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise error(
                f"{name} has a name of {size} bytes ({part[:24]}...): a file system takes {NAME_MAX} at most; "
                "give a shorter path"
            )
