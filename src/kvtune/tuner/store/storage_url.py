"""What a storage URL names, checked before it is opened: a database port that is a TCP port,
and a `sqlite:///PATH` file that is an Optuna study's database or new. Bad input here is a
one-line `SpecError` (exit 2), never a storage taken as down (exit 75, which a scheduler retries
for ever) nor another program's database that Optuna would add its tables to. Apart from
tuner/store/storage.py, which opens what passes.
"""

from __future__ import annotations

from pathlib import Path

from kvtune.errors import SpecError
from kvtune.readable import check_name_lengths
from kvtune.tuner.store.connect import redact

GRPC_PREFIX = "grpc://"


# Tables every Optuna RDB storage has; a SQLite file with tables but none of these is another
# program's database.
_OPTUNA_TABLES = {"studies", "version_info", "alembic_version"}


def check_port(url: str) -> None:
    """`SpecError` when a database URL's port is not a TCP port (1..65535): the driver took
    'postgresql://host:99999/db' as a storage that does not answer (exit 75, retried by a
    scheduler for ever) and 'host:http' as an int() error."""
    import sqlalchemy.engine

    if url.startswith(("sqlite", GRPC_PREFIX)) or "://" not in url:
        return
    try:
        port = sqlalchemy.engine.make_url(url).port
    except ValueError:  # sqlalchemy's int() of the port: the only number in the URL
        given = url.split("://", 1)[1].rsplit("@", 1)[-1].split("/", 1)[0].rpartition(":")[2]
        raise SpecError(f"storage {redact(url)}: port {given!r} is not a TCP port (1..65535)") from None
    except Exception:  # a URL that does not parse: opening it says so
        return
    if port is not None and not 0 < port < 65536:
        raise SpecError(f"storage {redact(url)}: port {port} is not a TCP port (1..65535)")


def check_sqlite_file(url: str) -> None:
    """`SpecError` when the `sqlite:///PATH` storage at `url` is a file that is no Optuna study
    database: a SQLite database of another program (Optuna would add its tables beside that
    program's, silently, or fail with 'no such table' on a read), or a file that is not SQLite
    at all. A file that is not there, or empty, is a new storage (a run creates it); a storage
    that is not SQLite is not looked at."""
    import sqlite3

    path = sqlite_file(url)
    if path is None:
        return
    if not path.is_file() or path.stat().st_size == 0:
        return
    named = f"storage {redact(url)}: {path}"
    with path.open("rb") as f:
        header = f.read(16)
    if header != b"SQLite format 3\x00":
        raise SpecError(f"{named} is not a SQLite database: give a new file, or the study.db kvtune wrote")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise SpecError(f"{named} cannot be read as SQLite: {e}") from e
    if tables and not tables & _OPTUNA_TABLES:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise SpecError(
            f"{named} is the database of another program (its tables: {shown}), not an Optuna study's: "
            "give a new file, or the study.db kvtune wrote"
        )


def sqlite_file(url: str) -> Path | None:
    """The file a `sqlite:///PATH` storage URL names; None for in-memory SQLite and other URLs.
    `SpecError` when a name in it is longer than a file system takes: every caller asks the path
    `is_file()`, which raises 'File name too long' rather than answer."""
    import sqlalchemy.engine

    if not url.startswith("sqlite"):
        return None
    try:
        database = sqlalchemy.engine.make_url(url).database
    except Exception:  # a malformed URL: rdb_storage names it
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    check_name_lengths(database, f"storage {redact(url)}")
    return Path(database)
