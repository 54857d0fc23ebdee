"""The unit suite's rule, enforced: a unit test opens no network socket and starts no process
(the fakes are injected: httpx.MockTransport, MockOpenAI, recorded command outputs, VirtualClock).
A test that needs a real socket or a child process belongs in tests/integration. The guard
refuses `socket.connect`/`bind` on inet sockets and `subprocess.Popen` with a message naming the
rule; Unix socketpairs (asyncio's self-pipe) stay allowed."""

from __future__ import annotations

import socket
import subprocess

import pytest

# matplotlib lists the system fonts with `fc-list` (a child process) the first time it is imported
# on a machine with no font cache (~/.cache/matplotlib): a fresh CI machine. That is the
# environment's one-time set-up, not a test starting a process, so it happens here, before the
# guard below is in force; afterwards the cache is read from disk.
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.font_manager  # noqa: F401  (builds the font cache once)
except ImportError:  # the report tests say what is missing themselves
    pass

RULE = "tests/unit opens no network socket and starts no process: inject a fake, or move the test to tests/integration"


class UnitRuleBroken(AssertionError):
    pass


@pytest.fixture(autouse=True)
def no_network_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect, real_bind = socket.socket.connect, socket.socket.bind

    def guarded(real):  # type: ignore[no-untyped-def]
        def call(self: socket.socket, address, *args, **kwargs):  # type: ignore[no-untyped-def]
            if self.family in (socket.AF_INET, socket.AF_INET6):
                raise UnitRuleBroken(f"{RULE} (socket {real.__name__} to {address!r})")
            return real(self, address, *args, **kwargs)

        return call

    def no_popen(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise UnitRuleBroken(f"{RULE} (subprocess {args[0] if args else kwargs.get('args')!r})")

    monkeypatch.setattr(socket.socket, "connect", guarded(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(socket.socket.connect_ex))
    monkeypatch.setattr(socket.socket, "bind", guarded(real_bind))
    monkeypatch.setattr(subprocess.Popen, "__init__", no_popen)
