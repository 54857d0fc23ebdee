"""Server process handling: ready, crash vs timeout, port safety, process-group stop.

The tests here start no process; those that do are in tests/integration/launchers/test_process.py."""

import sys

import pytest

from kvtune.launchers.listeners import other_listener
from kvtune.launchers.process import address_in_use, last_error_line

FAKE = [sys.executable, "-m", "kvtune.testing.fake_server"]


SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]  # alive, never listens


def test_last_error_line():
    log = "loading\nerror: invalid argument: --bogus\nusage: ...\n"
    assert last_error_line(log) == "error: invalid argument: --bogus"
    assert last_error_line("a\nb\n") == "b"
    assert last_error_line("") == "(empty log)"


def test_other_listener_reads_proc(tmp_path):
    """A fake /proc: port 8080 (0x1F90) listens on socket inode 555."""
    (tmp_path / "net").mkdir()
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    row = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 555 1\n"
    (tmp_path / "net" / "tcp").write_text(head + row)
    assert other_listener(8081, pgid=10, proc=tmp_path) is None  # nobody listens there
    assert other_listener(8080, pgid=10, proc=tmp_path) is None  # holder unseen: not "another"
    for pid, pgid in ((10, 10), (42, 42)):
        (tmp_path / str(pid) / "fd").mkdir(parents=True)
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (srv) S 1 {pgid} {pgid} 0")
        (tmp_path / str(pid) / "comm").write_text("srv\n")
    (tmp_path / "42" / "fd" / "3").symlink_to("socket:[555]")
    assert other_listener(8080, pgid=10, proc=tmp_path).pid == 42
    (tmp_path / "10" / "fd" / "4").symlink_to("socket:[555]")  # our group holds it too
    assert other_listener(8080, pgid=10, proc=tmp_path) is None


@pytest.mark.parametrize(
    "line, clash",
    [
        ("srv    start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080", True),  # llama-server
        (
            "ERROR: [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
            True,
        ),  # vLLM (uvicorn)
        ("OMP: Warning: could not bind thread to core 3", False),
        ("error: unknown argument: --foo", False),
    ],
)
def test_address_in_use_reads_real_server_logs(line, clash):
    assert (address_in_use(f"loading\n{line}\nexiting\n") is not None) is clash
