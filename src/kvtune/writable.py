"""Places kvtune will write, checked before anything starts: a runs folder (`kvtune run`), a
report or an export (`kvtune report -o`, `kvtune export -o`). A folder that cannot be made (a
path under a regular file) or written (read-only to this user) was an OSError traceback after
the work was done, or a runs folder half made; here it is one line that names the flag, the
path given and what is in the way. Read-only is what `os.access` says, so it holds for the user
kvtune runs as (root may write where the mode bits say no).
"""

from __future__ import annotations

import os
from pathlib import Path

from kvtune.errors import SpecError
from kvtune.readable import check_name_lengths, special_kind


def _nearest(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (a link counts, even a broken one)."""
    p = path.absolute()
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _usable_folder(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def check_folder(path: str | Path, what: str) -> Path:
    """`path` is a folder kvtune can write in, or can create (with its parents): else one line
    naming `what` (the flag, e.g. --runs-dir). Returns the path."""
    text = str(path)
    if not text.strip():
        raise SpecError(f"{what} is empty: give a folder, or leave the flag out")
    p = Path(text).expanduser()
    nearest = _nearest(p)
    if not nearest.is_dir():
        where = "is a file" if nearest == p.absolute() else f"would be under {nearest}, which is a file"
        raise SpecError(f"{what} {text!r} {where}, not a folder: give a folder")
    if not _usable_folder(nearest):
        made = "" if nearest == p.absolute() else f" (it would be made in {nearest})"
        raise SpecError(f"{what} {text!r} is not writable{made}: read-only to this user; give a folder you can write")
    return p


def check_file(path: str | Path, what: str) -> Path:
    """`path` is a file kvtune can write (created, or replaced): its folder exists and can be
    written, and it is no folder itself; else one line naming `what` (e.g. --output)."""
    text = str(path)
    if not text.strip():
        raise SpecError(f"{what} is empty: give a file to write, or leave the flag out")
    p = Path(text).expanduser()
    check_name_lengths(p, f"{what} {text!r}")  # else is_dir() raises 'File name too long'
    if p.is_dir():
        raise SpecError(f"{what} {text!r} is a folder: give a file name in it")
    kind = special_kind(p)  # a named pipe blocks the write; a device is replaced or chmod-ed (as root)
    if kind is not None:
        raise SpecError(f"{what} {text!r} is {kind}, not a file: give the path of a file to write")
    folder = p.absolute().parent
    nearest = _nearest(folder)
    if not nearest.is_dir():
        raise SpecError(f"{what} {text!r} cannot be written: {nearest} is a file, not a folder")
    if nearest != folder:
        raise SpecError(f"{what} {text!r} cannot be written: folder {folder} does not exist; create it first")
    if not _usable_folder(folder) or (os.path.exists(p) and not os.access(p, os.W_OK)):
        raise SpecError(f"{what} {text!r} is not writable: read-only to this user; give a path you can write")
    return p
