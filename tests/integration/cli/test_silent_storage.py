"""A storage that takes the connection and never answers (issue 41): every command that opens a
storage (`kvtune run`, `run --setup-only`, `show`, `report`, `export`, `export-workers`, `worker`,
`confirm`, and `proxy` in front of a database) says the wait in one line on stderr, while it
waits, then refuses in one line (exit 75, a scheduler retries), with nothing on stdout (no banner
before the refusal), nothing written and the password masked. The silent host is a socket of
this test that accepts and says nothing. The URL comes by --storage (postgresql) or by
KVTUNE_STORAGE (grpc): both ways into every command without doubling the runs. How soon the wait
is said is a figure of benchmarks/bad_input.py, not a timed test."""

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Each command that opens a storage, after `kvtune` and before the storage (R: the runs folder,
#: C: the current folder; nothing may appear in either).
COMMANDS = {
    "run": ["run", "--runs-dir", "R"],
    "run-setup-only": ["run", "--setup-only", "--runs-dir", "R"],
    "show": ["show", "s", "--runs-dir", "R"],
    "report": ["report", "s", "--runs-dir", "R"],
    "export": ["export", "s", "--runs-dir", "R"],
    "export-workers": [
        "export-workers",
        "-f",
        "slurm",
        "--study",
        "s",
        "--workers",
        "2",
        "--mem",
        "4G",
        "-o",
        "C/w.sbatch",
    ],
    "worker": ["worker", "--study", "s", "--runs-dir", "R"],
    "confirm": ["confirm", "--study", "s", "--runs-dir", "R"],
    "proxy": ["proxy", "--port", "PORT"],  # its database: a proxy in front of a proxy is bad input
}
URLS = {"postgresql": "postgresql://nobody:secret@127.0.0.1:{port}/kvtune", "grpc": "grpc://127.0.0.1:{port}"}
CASES = [(c, u) for c in COMMANDS for u in URLS if not (c == "proxy" and u == "grpc")]


@pytest.mark.parametrize(("command", "scheme"), CASES, ids=[f"{c}-{u}" for c, u in CASES])
def test_a_silent_storage_is_waited_on_in_one_line_then_refused(silent_port, tmp_path, command, scheme):
    url = URLS[scheme].format(port=silent_port)
    env = {**os.environ, "KVTUNE_STORAGE_CONNECT_TIMEOUT_S": "3", "KVTUNE_PROXY_WAIT_S": "3", "COLUMNS": "400"}
    env.pop("KVTUNE_STORAGE", None)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    args = [
        str(tmp_path / "runs") if a == "R" else str(free_port()) if a == "PORT" else a.replace("C/", f"{cwd}/")
        for a in COMMANDS[command]
    ]
    if scheme == "postgresql":
        args += ["--storage", url]
    else:
        env["KVTUNE_STORAGE"] = url
    p = subprocess.Popen(
        [sys.executable, "-m", "kvtune.cli", *args],
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
    assert lines[0].startswith("kvtune: storage ") and "has not answered in 1 s: waiting for it up to 3 s" in lines[0]
    assert lines[1].startswith("kvtune: error: storage ") and "is unreachable" in lines[1], lines
    assert "secret" not in first + rest + stdout, "the storage's password was printed"
    assert not stdout.strip(), f"printed before the refusal: {stdout}"
    assert not (tmp_path / "runs").exists() and not list(cwd.iterdir()), "something was written"
