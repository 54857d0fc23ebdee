"""Server process handling: ready, crash vs timeout, port safety, process-group stop.

The tests here start no process; those that do are in tests/integration/launchers/test_process.py."""

import sys

import pytest

from kvtune.launchers.process import address_in_use, last_error_line

FAKE = [sys.executable, "-m", "kvtune.testing.fake_server"]


SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]  # alive, never listens


def test_last_error_line():
    log = "loading\nerror: invalid argument: --bogus\nusage: ...\n"
    assert last_error_line(log) == "error: invalid argument: --bogus"
    assert last_error_line("a\nb\n") == "b"
    assert last_error_line("") == "(empty log)"


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
