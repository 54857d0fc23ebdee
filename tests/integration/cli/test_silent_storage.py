"""A storage that takes the connection and never answers (issue 41): `kvtune run --storage URL`
says the wait in one line on stderr, while it waits, then refuses in one line (exit 75, a
scheduler retries), with nothing on stdout (no banner before the refusal), no runs folder and the
password masked. The silent host is a socket of this test that accepts and says nothing. How
soon the wait is said is a figure of benchmarks/bad_input.py, not a timed test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

RETRY = 75


@pytest.fixture
def silent_port():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for c in held:
        c.close()


@pytest.mark.parametrize(
    "url", ["postgresql://nobody:secret@127.0.0.1:{port}/kvtune", "grpc://127.0.0.1:{port}"], ids=["postgresql", "grpc"]
)
def test_a_silent_storage_is_waited_on_in_one_line_then_refused(silent_port, tmp_path, url):
    url = url.format(port=silent_port)
    env = {**os.environ, "KVTUNE_STORAGE_CONNECT_TIMEOUT_S": "4", "KVTUNE_PROXY_WAIT_S": "4", "COLUMNS": "400"}
    env.pop("KVTUNE_STORAGE", None)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    p = subprocess.Popen(
        [sys.executable, "-m", "kvtune.cli", "run", "--runs-dir", str(tmp_path / "runs"), "--storage", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )
    assert p.stderr is not None
    first = p.stderr.readline()
    still_waiting = p.poll() is None  # the wait is said while it waits, not with the refusal
    said_at = time.monotonic()
    stdout, rest = p.communicate(timeout=120)
    assert still_waiting and time.monotonic() - said_at > 1, "the wait was said only once it was over"
    lines = [first.strip(), *[ln for ln in rest.splitlines() if ln.strip()]]
    assert p.returncode == RETRY, (p.returncode, lines)
    assert len(lines) == 2, lines
    assert lines[0].startswith("kvtune: storage ") and "has not answered in 1 s: waiting for it up to 4 s" in lines[0]
    assert lines[1].startswith("kvtune: error: storage ") and "is unreachable" in lines[1], lines
    assert "secret" not in first + rest + stdout, "the storage's password was printed"
    assert not stdout.strip(), f"printed before the refusal: {stdout}"
    assert not (tmp_path / "runs").exists() and not list(cwd.iterdir()), "something was written"
