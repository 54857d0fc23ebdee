"""No password in any command line or server environment, read from /proc as another user of the
host would: `kvtune proxy` and a worker given the storage URL (password included) in
KVTUNE_STORAGE carry it in no argv, and the servers the worker starts (the guard and the server
under it) do not inherit it. Real processes on a real PostgreSQL; the worker is
kvtune.testing.driver on the fake launcher (its servers start through launchers/process.py as
every backend's do)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvtune.launchers.process import free_port
from tests.postgres import PostgresServer

pytestmark = pytest.mark.timeout(300)
SECRET = "s3cret-pw"


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw if b"=" in item)


def marked(mark: str) -> list[int]:
    """The processes whose environment carries KVTUNE_TEST_MARK=`mark` (a worker's servers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if environ(int(entry.name)).get("KVTUNE_TEST_MARK") == mark:
                    pids.append(int(entry.name))
            except OSError:  # ended meanwhile, or not ours to read
                continue
    return pids


@pytest.fixture(scope="module")
def url():
    server = PostgresServer()
    # trust authentication: the password is accepted and ignored, as any would be
    yield server.url.replace("postgres@", f"postgres:{SECRET}@")
    server.remove()


def test_a_proxy_given_the_url_in_its_environment_has_no_password_in_argv(url):
    port = free_port()
    proxy = subprocess.Popen(
        [sys.executable, "-m", "kvtune.cli", "proxy", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KVTUNE_STORAGE": url},
    )
    try:
        assert proxy.stdout is not None
        banner = proxy.stdout.readline()
        assert f"on 127.0.0.1:{port}" in banner and SECRET not in banner, banner
        assert SECRET not in cmdline(proxy.pid)
    finally:
        proxy.send_signal(signal.SIGTERM)
        out, _ = proxy.communicate(timeout=30)
    assert proxy.returncode == 0 and "storage proxy stopped" in out, out


def test_a_worker_and_its_servers_carry_no_password(url, tmp_path):
    mark = f"secret-test-{os.getpid()}"
    worker = subprocess.Popen(  # 24 requests of 1 s at concurrency 2: trials of about 12 s
        [sys.executable, "-m", "kvtune.testing.driver", "--runs-dir", str(tmp_path), "--study", "secret"]
        + ["--trials", "3", "--requests", "24", "--base-ttft-ms", "1000", "--mark", mark],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KVTUNE_STORAGE": url},
    )
    try:
        deadline = time.monotonic() + 180
        servers: list[int] = []
        while not servers and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(0.3)
            servers = marked(mark)
        assert servers, f"the worker started no server: {worker.poll()}"
        assert SECRET not in cmdline(worker.pid)
        assert environ(worker.pid)["KVTUNE_STORAGE"] == url  # where it reads it from
        for pid in servers:  # the guard and the server under it
            assert SECRET not in cmdline(pid)
            env = environ(pid)
            assert "KVTUNE_STORAGE" not in env and not any(SECRET in v for v in env.values()), cmdline(pid)
    finally:
        worker.kill()
        worker.communicate()
        for pid in marked(mark):  # its servers die with it; any left over is stopped by PID
            os.kill(pid, signal.SIGKILL)
