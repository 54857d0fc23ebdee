"""A storage that does not answer is named as unreachable (exit 75, a scheduler retries); a bad
URL, a missing driver or a wrong password is bad input (exit 2); a study that must exist creates
no SQLite file; a storage slow to answer is said to be waited on, once, while the wait goes on.
The foreign errors are built here as their libraries raise them: no socket."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import optuna
import pytest
import sqlalchemy.exc

from kvtune.errors import EXIT_BAD_INPUT, EXIT_TRANSIENT, SpecError, StorageUnreachableError
from kvtune.tuner.store import storage, storage_url
from kvtune.tuner.store.connect import open_error, unreachable, waited

PG = "postgresql://kvtune:s3cret@db-host:5432/kvtune"


class DriverError(Exception):
    """A DB-API error as psycopg raises it: `sqlstate` None for a connection that never opened."""

    def __init__(self, message: str, sqlstate: str | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate


def raised(orig: DriverError, wrap_in_optuna: bool = False) -> Exception:
    """sqlalchemy's OperationalError from `orig` (and Optuna's wrapping of it, as a read-only
    RDBStorage raises it), with the cause chain their `raise ... from` leaves."""
    try:
        try:
            try:
                raise orig
            except DriverError as d:
                raise sqlalchemy.exc.OperationalError("SELECT 1", {}, d) from d
        except sqlalchemy.exc.OperationalError as o:
            if not wrap_in_optuna:
                raise
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from o
    except Exception as e:
        return e
    raise AssertionError("unreachable")


REFUSED = DriverError('connection to server at "db-host" (10.0.0.5), port 5432 failed: Connection refused')


def test_a_refused_connection_is_unreachable_with_the_drivers_words_and_no_password():
    e = unreachable(raised(REFUSED, wrap_in_optuna=True), PG)
    assert isinstance(e, StorageUnreachableError) and e.exit_code == EXIT_TRANSIENT == 75
    text = str(e)
    assert text.startswith("storage postgresql://kvtune:***@db-host:5432/kvtune is unreachable: connection to")
    assert "Connection refused" in text and "during the commit" not in text and "s3cret" not in text
    assert "\n" not in text and "retry" in text


def test_a_password_in_the_drivers_message_is_masked():
    e = unreachable(raised(DriverError("could not connect as kvtune:s3cret")), PG)
    assert e is not None and "s3cret" not in str(e) and "kvtune:***" in str(e)


@pytest.mark.parametrize("state", ["28P01", "28000", "3D000"])
def test_a_database_that_answered_no_is_bad_input(state):
    """A wrong password or role, a database that does not exist: retrying would not help."""
    e = raised(DriverError("password authentication failed for user kvtune", state))
    assert unreachable(e, PG) is None
    refusal = open_error(e, PG)
    assert type(refusal) is SpecError and refusal.exit_code == EXIT_BAD_INPUT
    assert "cannot open storage postgresql://kvtune:***@db-host" in str(refusal) and "s3cret" not in str(refusal)


def test_a_database_shutting_down_is_unreachable():
    assert unreachable(raised(DriverError("the database system is shutting down", "57P01")), PG) is not None


def test_a_sqlite_file_is_never_unreachable():
    """A local file that cannot be opened is a wrong path: bad input, not a retry."""
    e = raised(DriverError("unable to open database file"))
    assert unreachable(e, "sqlite:///nowhere/study.db") is None
    assert type(open_error(e, "sqlite:///nowhere/study.db")) is SpecError


class RpcError(Exception):
    """grpc.RpcError as a stub call raises it: `code()` names the status."""

    def __init__(self, status: str):
        super().__init__(f"<_InactiveRpcError of RPC that terminated with: status = StatusCode.{status}>")
        self.status = status

    def code(self):
        return SimpleNamespace(name=self.status)


def test_a_proxy_that_stopped_answering_is_unreachable():
    assert unreachable(RpcError("UNAVAILABLE"), "grpc://proxy-host:13000") is not None
    assert unreachable(RpcError("DEADLINE_EXCEEDED"), "grpc://proxy-host:13000") is not None
    assert unreachable(RpcError("NOT_FOUND"), "grpc://proxy-host:13000") is None


def test_a_bug_is_not_a_storage_that_is_down():
    assert unreachable(KeyError("trial_id"), PG) is None
    assert unreachable(ConnectionRefusedError(111, "Connection refused"), PG) is not None


def test_a_missing_driver_is_bad_input():
    try:
        try:
            raise ModuleNotFoundError("No module named 'pymysql'", name="pymysql")
        except ImportError as i:
            raise ImportError("Failed to import DB access module for the specified storage URL.") from i
    except ImportError as e:
        refusal = open_error(e, "mysql+pymysql://u:pw@db/kvtune")
    assert type(refusal) is SpecError and "needs a database driver" in str(refusal)


@pytest.mark.parametrize(
    "url,file",
    [
        ("sqlite:///study.db", "study.db"),
        ("sqlite:////abs/runs/study.db", "/abs/runs/study.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        (PG, None),
        ("grpc://db-host:13000", None),
    ],
)
def test_the_file_a_sqlite_url_names(url, file):
    found = storage_url.sqlite_file(url)
    assert (str(found) if found else None) == file


def test_a_sqlite_file_named_past_what_a_file_system_takes_is_refused_where_the_url_is_read():
    """Every caller asks the path is_file(), which raised 'File name too long' (trace_fit.py too)."""
    with pytest.raises(SpecError, match="has a name of 303 bytes"):
        storage_url.sqlite_file(f"sqlite:////tmp/{'x' * 300}.db")


def test_a_study_that_must_exist_creates_no_sqlite_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'nope.db'}"
    with pytest.raises(SpecError, match=r"no study 's' in sqlite:///.*nope\.db does not exist"):
        storage.load_study("s", url)
    with pytest.raises(SpecError, match="is a folder"):
        storage.load_study("s", f"sqlite:///{tmp_path}")
    assert list(tmp_path.iterdir()) == []


def test_a_study_that_must_exist_creates_no_tables(tmp_path):
    """A worker pointed at some other SQLite file leaves it as it was."""
    other = tmp_path / "other.db"
    other.write_bytes(b"")
    with pytest.raises(SpecError, match=r"other\.db is empty; give the study\.db"):
        storage.load_study("s", f"sqlite:///{other}")
    assert other.read_bytes() == b""
    import sqlite3

    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE notes (body TEXT)")
    before = other.read_bytes()
    with pytest.raises(SpecError, match=r"is the database of another program \(its tables: notes\)"):
        storage.load_study("s", f"sqlite:///{other}")
    assert other.read_bytes() == before


def test_a_sqlite_storage_is_reachable_without_being_created(tmp_path):
    storage.check_reachable(f"sqlite:///{tmp_path / 'new.db'}")
    assert list(tmp_path.iterdir()) == []


# ---- the wait every command that opens a storage says (connect.waited) -----------------------


def test_a_storage_slow_to_answer_is_said_to_be_waited_on_while_the_wait_goes_on():
    said: list[str] = []
    answered = threading.Event()

    def attempt() -> str:  # answers only once the wait was said: the line comes while it waits
        if not answered.wait(60):
            raise AssertionError("the wait was never said")
        return "opened"

    def on_wait(line: str) -> None:
        said.append(line)
        answered.set()

    assert waited(PG, 10, attempt, on_wait) == "opened"
    assert said == [
        "storage postgresql://kvtune:***@db-host:5432/kvtune has not answered in 1 s: "
        "waiting for it up to 10 s in all (Ctrl-C stops)"
    ]


def test_what_the_try_raised_is_raised_to_the_command():
    refused = StorageUnreachableError("storage ... is unreachable")

    def attempt() -> None:
        raise refused

    with pytest.raises(StorageUnreachableError) as e:
        waited("grpc://db-host:13000", 10, attempt, None)
    assert e.value is refused


def test_a_sqlite_file_is_opened_in_the_callers_thread_with_nothing_to_say():
    said: list[str] = []
    assert waited("sqlite:///x.db", 10, threading.current_thread, said.append) is threading.current_thread()
    assert said == []


def test_a_short_password_is_masked_as_a_word_not_inside_the_drivers_words():
    """Password 'p' masked anywhere made 'invalid ***ort number' of the driver's message."""
    from kvtune.tuner.store.connect import mask_password

    assert mask_password('invalid port number: "p" for user p', "p") == 'invalid port number: "***" for user ***'
    assert mask_password("password=s3cret; s3cretly", "s3cret") == "password=***; ***ly"  # 4+: anywhere
    assert mask_password("no password here", None) == "no password here"


@pytest.mark.parametrize(
    "url,port",
    [
        ("postgresql://kvtune:s3cret@db-host:99999/kvtune", "99999"),
        ("postgresql://kvtune:s3cret@db-host:0/kvtune", "0"),
        ("postgresql://kvtune:s3cret@db-host:http/kvtune", "'http'"),
    ],
)
def test_a_database_port_out_of_range_is_bad_input_not_a_storage_that_is_down(url, port):
    """psycopg's 'invalid port number' was read as a storage that does not answer (exit 75, a
    scheduler retries it for ever); it is bad input, said before any connection."""
    with pytest.raises(SpecError, match=f"port {port} is not a TCP port") as e:
        storage_url.check_port(url)
    assert "s3cret" not in str(e.value)
    storage_url.check_port("postgresql://kvtune@db-host:5432/kvtune")
    storage_url.check_port("postgresql://kvtune@db-host/kvtune")  # the driver's default port
