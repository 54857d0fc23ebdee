"""Server process handling: ready, crash vs timeout, port safety, process-group stop.

Here the tests that start processes; the rest are in tests/unit/launchers/test_process.py."""

import os
import socket
import sys
import time

import httpx
import pytest

from kvtune.kinds import FailureKind
from kvtune.launchers.process import HEALTH_POLL_S, ServerProcess, ServerStartError, free_port
from kvtune.testing.fake_server import FakeOpenAIServer
from kvtune.testing.virtual_time import VirtualClock

FAKE = [sys.executable, "-m", "kvtune.testing.fake_server"]


def server(tmp_path, *extra, port=None):
    port = port or free_port()
    return ServerProcess(argv=[*FAKE, "--port", str(port), *extra], env={}, log_path=tmp_path / "server.log", port=port)


def test_ready_then_stopped(tmp_path):
    s = server(tmp_path).start()
    assert s.wait_ready(20) < 20
    pid = s.proc.pid
    s.stop()
    assert not s.alive()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole group is gone


def test_a_stop_signals_the_server_once(tmp_path):
    """llama-server takes a second SIGTERM as "exit now" from inside its signal handler (seen to
    abort, and once to hang until the KILL): the server gets one TERM, from the guard, and its
    graceful exit is waited for, not cut short by a KILL."""
    got = tmp_path / "signals"
    script = (
        "import signal, sys, time\n"
        f"log = open({str(got)!r}, 'a')\n"
        "def on_term(n, f):\n"
        "    log.write('TERM\\n'); log.flush()\n"
        "    time.sleep(0.5)\n"  # a shutdown that takes a moment: a second signal would land in it
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(0.05)\n"
    )
    s = ServerProcess(argv=[sys.executable, "-c", script], env={}, log_path=tmp_path / "server.log", port=free_port())
    s.start()
    for _ in range(200):  # until the server has installed its handler
        if b"ready" in (tmp_path / "server.log").read_bytes():
            break
        time.sleep(0.05)
    assert s.stop(grace_s=5.0) == 0  # the guard's status is the server's: a graceful exit, not a KILL
    assert got.read_text() == "TERM\n"


def test_crash_is_not_a_timeout(tmp_path):
    s = server(tmp_path, "--no-such-flag").start()
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(20)
    assert e.value.kind is FailureKind.START_FAILED and e.value.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in e.value.reason
    assert not e.value.transient  # a refused argument is a verdict on the config
    s.stop()


SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]  # alive, never listens


def _health(answers: list[int]) -> httpx.MockTransport:
    """/health answering these statuses in turn, then the last one forever."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(answers.pop(0) if len(answers) > 1 else answers[0])

    return httpx.MockTransport(handler)


def _virtual(tmp_path, answers: list[int]) -> ServerProcess:
    """A live process whose health answers come from `answers`, waited for on virtual time."""
    return ServerProcess(
        argv=SLEEPER,
        env={},
        log_path=tmp_path / "server.log",
        port=free_port(),
        clock=VirtualClock(),
        health_transport=_health(answers),
    )


def test_timeout_when_never_healthy(tmp_path):
    s = _virtual(tmp_path, [503]).start()
    try:
        with pytest.raises(ServerStartError) as e:
            s.wait_ready(120)
        # polled every HEALTH_POLL_S on the virtual clock until past 120 s: no real wait
        assert s.clock.monotonic() == pytest.approx(120 + HEALTH_POLL_S, abs=1e-6)
        assert s.alive()  # a timeout, not a crash
    finally:
        s.stop()
    assert e.value.kind is FailureKind.START_TIMEOUT and e.value.transient  # retried once
    assert "not healthy after 120 s" in e.value.reason
    assert not s.alive()


def test_seconds_to_ready_are_read_on_the_clock(tmp_path):
    s = _virtual(tmp_path, [503, 503, 503, 200]).start()
    try:
        assert s.wait_ready(120) == pytest.approx(3 * HEALTH_POLL_S, abs=1e-9)  # the 4th poll
    finally:
        s.stop()


def test_port_already_in_use_is_never_mistaken_for_ready(tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        s = server(tmp_path, port=other.getsockname()[1])
        with pytest.raises(ServerStartError) as e:
            s.start()
        assert e.value.kind is FailureKind.PORT_BUSY and e.value.transient


def test_a_server_that_could_not_bind_its_port_is_a_transient_port_clash(tmp_path):
    s = server(tmp_path, "--port-clash", "1").start()
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(20)
    assert e.value.kind is FailureKind.PORT_BUSY and e.value.transient and e.value.returncode == 1
    assert "Address already in use" in e.value.reason
    s.stop()


def test_another_process_answering_on_the_port_is_not_our_server(tmp_path):
    port = free_port()
    # our process lives but never binds; another (this test's own thread) answers on its port
    s = ServerProcess(
        argv=[sys.executable, "-c", "import time; time.sleep(60)"], env={}, log_path=tmp_path / "server.log", port=port
    ).start()
    try:
        with FakeOpenAIServer(port=port):
            with pytest.raises(ServerStartError) as e:
                s.wait_ready(20)
    finally:
        s.stop()
    assert e.value.kind is FailureKind.PORT_BUSY and e.value.transient
    assert f"pid {os.getpid()}" in e.value.reason
