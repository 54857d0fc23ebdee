"""Whether a study's storage answers, and a foreign error opening it as kvtune's one line: a
database or proxy that does not answer is `StorageUnreachableError` (exit 75, a scheduler
retries), anything else (a bad URL, a missing driver, a wrong password) is bad input (exit 2).
The one place sqlalchemy's, the drivers' and gRPC's connection errors are read.
"""

from __future__ import annotations

from kvtune.errors import SpecError, StorageUnreachableError

# SQLSTATE classes a database answers with when it was reached but refused the request: a wrong
# password or role (28), a database that does not exist (3D). Bad input, not a storage that is down.
_REFUSED_SQLSTATES = ("28", "3D")


def unreachable(e: BaseException, url: str) -> StorageUnreachableError | None:
    """`e` (or what caused it) as the storage at `url` not answering (a refused or timed-out
    connection, a database starting or shutting down, a gRPC proxy UNAVAILABLE), else None. The
    one place a foreign connection error becomes kvtune's transient one (exit 75: retry)."""
    if url.startswith("sqlite"):
        return None  # a local file: a wrong path or a broken file is bad input
    chain = _chain(e)
    if not any(_is_connection_error(c) for c in chain):
        return None
    return StorageUnreachableError(
        f"storage {redact(url)} is unreachable: {_detail(e, url)}; check that it is up and that this "
        f"host can reach it, then retry"
    )


def _is_connection_error(e: BaseException) -> bool:
    """A database or proxy that did not answer, by the exception's kind (never its text)."""
    import sqlalchemy.exc

    if isinstance(e, (ConnectionError, TimeoutError)):
        return True
    if isinstance(e, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)):
        state = getattr(e.orig, "sqlstate", None) or ""
        return not state.startswith(_REFUSED_SQLSTATES)
    code = getattr(e, "code", None)  # grpc.RpcError, without importing grpc (an optional extra)
    return callable(code) and getattr(code(), "name", None) in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


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
    password = _password(url)
    return (text.replace(password, "***") if password else text)[:200]


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
