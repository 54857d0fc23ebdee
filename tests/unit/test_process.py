"""Server process handling: ready, crash vs timeout, port safety, process-group stop."""

import os
import socket
import sys

import pytest

from kvtune.kinds import FailureKind
from kvtune.launchers.process import ServerProcess, ServerStartError, free_port, last_error_line

FAKE = [sys.executable, "-m", "kvtune.testing.fake_server"]


def server(tmp_path, *extra, port=None):
    port = port or free_port()
    return ServerProcess(argv=[*FAKE, "--port", str(port), *extra], env={},
                         log_path=tmp_path / "server.log", port=port)


def test_ready_then_stopped(tmp_path):
    s = server(tmp_path).start()
    assert s.wait_ready(20) < 20
    pid = s.proc.pid
    s.stop()
    assert not s.alive()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole group is gone


def test_crash_is_not_a_timeout(tmp_path):
    s = server(tmp_path, "--no-such-flag").start()
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(20)
    assert e.value.kind is FailureKind.START_FAILED and e.value.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in e.value.reason
    s.stop()


def test_timeout_when_never_healthy(tmp_path):
    s = server(tmp_path, "--startup-delay-s", "60").start()
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(1.5)
    assert e.value.kind is FailureKind.START_TIMEOUT
    s.stop()
    assert not s.alive()


def test_port_already_in_use_is_never_mistaken_for_ready(tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        s = server(tmp_path, port=other.getsockname()[1])
        with pytest.raises(ServerStartError) as e:
            s.start()
        assert e.value.kind is FailureKind.PORT_BUSY


def test_last_error_line():
    log = "loading\nerror: invalid argument: --bogus\nusage: ...\n"
    assert last_error_line(log) == "error: invalid argument: --bogus"
    assert last_error_line("a\nb\n") == "b"
    assert last_error_line("") == "(empty log)"
