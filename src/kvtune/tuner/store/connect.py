"""Whether a study's storage answers, and a foreign error opening it as kvtune's one line: a
database or proxy that does not answer is `StorageUnreachableError` (exit 75, a scheduler
retries), anything else (a bad URL, a missing driver, a wrong password) is bad input (exit 2).
The one place sqlalchemy's, the drivers' and gRPC's connection errors are read.
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

from kvtune.errors import SpecError, StorageUnreachableError

T = TypeVar("T")

# SQLSTATE classes a database answers with when it was reached but refused the request: a wrong
# password or role (28), a database that does not exist (3D). Bad input, not a storage that is down.
_REFUSED_SQLSTATES = ("28", "3D")
# SQLSTATEs that pass on their own, whatever exception class the driver maps them to: a broken
# connection (08), a transaction rolled back by a serialization failure or a deadlock (40),
# too many connections (53300), the server shutting down or starting up (57P01..57P03).
_TRANSIENT_SQLSTATES = ("08", "40", "53300", "57P")
# gRPC statuses of a proxy that did not answer (kvtune's proxy also answers UNAVAILABLE when the
# database behind it did not: tuner/store/storage_proxy.py).
_TRANSIENT_GRPC = ("UNAVAILABLE", "DEADLINE_EXCEEDED")


#: A storage silent this long is said to be waited on: a refusal comes within a second, and a
#: host that takes the connection and never answers would otherwise hold a command silent for
#: its whole connect timeout.
SAY_WAIT_S = 1.0


def waited(url: str, total_s: float, attempt: Callable[[], T], on_wait: Callable[[str], None] | None) -> T:
    """What `attempt` returns or raises: one try at the storage at `url`, which ends within
    `total_s` (its connect timeout). When it has not ended within SAY_WAIT_S the wait is said
    through `on_wait`, one line, while it goes on; the try runs in a thread of its own for that,
    and Ctrl-C stops the wait. Every command that opens a storage opens it through here
    (storage.py `check_reachable`, `make_storage`; the proxy's database). A SQLite file is
    opened as it is: nothing to wait on."""
    if url.startswith("sqlite"):
        return attempt()
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(attempt())
        except BaseException as e:  # handed to the caller's thread below
            failed.append(e)

    worker = threading.Thread(target=run, name="kvtune-storage-open", daemon=True)
    worker.start()
    worker.join(SAY_WAIT_S)
    if worker.is_alive() and on_wait is not None and total_s > SAY_WAIT_S:  # a wait of a second is no wait to say
        on_wait(
            f"storage {redact(url)} has not answered in {SAY_WAIT_S:g} s: waiting for it up to {total_s:g} s "
            f"in all (Ctrl-C stops)"
        )
    worker.join()
    if failed:
        raise failed[0]
    return done[0]


def unreachable(e: BaseException, url: str, retried_s: float | None = None) -> StorageUnreachableError | None:
    """`e` (or what caused it) as the storage at `url` not answering (a refused or timed-out
    connection, a database starting or shutting down, a gRPC proxy UNAVAILABLE), else None. The
    one place a foreign connection error becomes kvtune's transient one (exit 75: retry).
    `retried_s`: how long the caller retried before giving up (tuner/store/retry.py)."""
    if not transient(e, url):
        return None
    tried = f" (retried for {retried_s:.0f} s)" if retried_s is not None else ""
    return StorageUnreachableError(
        f"storage {redact(url)} is unreachable: {_detail(e, url)}{tried}; check that it is up and that "
        f"this host can reach it, then retry"
    )


def transient(e: BaseException, url: str) -> bool:
    """Whether `e` (or what caused it) may pass on its own: the storage at `url` did not answer,
    dropped the connection, is restarting, or rolled the transaction back. A retry may succeed;
    anything else (a bug, a refusal, a finished trial) would fail the same way again. A SQLite
    file is never transient: a wrong path or a broken file is bad input."""
    if url.startswith("sqlite"):
        return False
    return any(_is_connection_error(c) for c in _chain(e))


def _is_connection_error(e: BaseException) -> bool:
    """A database or proxy that did not answer, by the exception's kind and code (never its text)."""
    import sqlalchemy.exc

    if isinstance(e, (ConnectionError, TimeoutError, sqlalchemy.exc.DisconnectionError)):
        return True
    if isinstance(e, sqlalchemy.exc.DBAPIError):
        state = getattr(e.orig, "sqlstate", None) or ""
        if e.connection_invalidated or state.startswith(_TRANSIENT_SQLSTATES):
            return True
        if isinstance(e, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)):
            return not state.startswith(_REFUSED_SQLSTATES)
        return False
    code = getattr(e, "code", None)  # grpc.RpcError, without importing grpc (an optional extra)
    return callable(code) and getattr(code(), "name", None) in _TRANSIENT_GRPC


def _chain(e: BaseException) -> list[BaseException]:
    """`e` and what caused it, outermost first."""
    seen: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _detail(e: BaseException, url: str) -> str:
    """The first line of the innermost cause (the driver's own words, not Optuna's "An exception
    is raised during the commit"), any password in `url` masked."""
    root = next((c for c in reversed(_chain(e)) if str(c).strip()), e)
    text = str(root).strip().splitlines()[0] if str(root).strip() else type(root).__name__
    return mask_password(text, _password(url))[:200]


def mask_password(text: str, password: str | None) -> str:
    """`text` with `password` masked: where it stands as a word of its own, and anywhere for
    one of 4 characters or more. A short password masked anywhere took letters out of the
    driver's words (password 'p': 'invalid ***ort number')."""
    import re

    if not password:
        return text
    if len(password) >= 4:
        return text.replace(password, "***")
    return re.sub(rf"(?<![A-Za-z0-9]){re.escape(password)}(?![A-Za-z0-9])", "***", text)


def _password(url: str) -> str | None:
    import sqlalchemy.engine

    try:
        return sqlalchemy.engine.make_url(url).password
    except Exception:  # not a database URL: nothing to mask
        return None


def open_error(e: Exception, url: str) -> SpecError | StorageUnreachableError:
    """What opening the storage at `url` failed with, as one line: a missing driver or a bad URL
    is bad input, a database that does not answer is transient."""
    if isinstance(e, ImportError) or isinstance(e.__cause__, ImportError):
        missing = e if isinstance(e, ImportError) else e.__cause__
        return SpecError(
            f"storage {url.split(':', 1)[0]!r} needs a database driver: {getattr(missing, 'name', None) or e} "
            f"(for PostgreSQL: pip install 'kvtune[postgres]', i.e. psycopg)"
        )
    return unreachable(e, url) or SpecError(f"cannot open storage {redact(url)}: {_detail(e, url)}")


def redact(url: str) -> str:
    """A storage URL without its password, for messages and results."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}" if ":" in creds else url
    return url
