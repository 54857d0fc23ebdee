"""Shared fixtures: tiny workloads and a tuner built from the fake launcher (real processes,
real load client, real SQLite storage; only the model is fake)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from kvtune.bench.workload import Workload
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.build import open_tuner, prepare
from kvtune.tuner.loop import Callbacks
from kvtune.tuner.spec import StudySpec

TINY = Workload(concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1,
                request_timeout_s=10)


@pytest.fixture
def tiny_workload() -> Workload:
    return TINY


@pytest.fixture
def make_tuner(tmp_path: Path):
    """Build a Tuner over the fake launcher; returns (tuner, events)."""

    def build(spec: StudySpec | None = None, launcher: FakeLauncher | None = None, **spec_kw):
        spec = spec or StudySpec(study="t", trials=4, workload=TINY, startup_timeout_s=20,
                                 **spec_kw).validate()
        events: list = []
        cb = Callbacks(trial_finished=events.append)
        prepared = prepare(spec, launcher=launcher or FakeLauncher(), runs_dir=str(tmp_path / "runs"))
        return open_tuner(prepared, cb), events

    return build


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A real PostgreSQL server on 127.0.0.1 for the session (Debian's postgresql package; `make
    test` installs it when run as root). Started here, stopped after."""
    import glob
    import os
    import shutil
    import subprocess

    from kvtune.launchers.process import free_port

    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    if not bins:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql)")
    pg = Path(bins[-1])
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="kvtune-pg-"))  # outside pytest's 0700 tmp tree
    data = base / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser")
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(base, "postgres")
    port = free_port()
    subprocess.run([*as_user, str(pg / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    subprocess.run([*as_user, str(pg / "pg_ctl"), "-D", str(data), "-l", str(data / "server.log"), "-w",
                    "-o", f"-h 127.0.0.1 -p {port} -k {data}", "start"], check=True, capture_output=True)
    try:
        subprocess.run([str(pg / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "kvtune"],
                       check=True, capture_output=True)
        yield f"postgresql://postgres@127.0.0.1:{port}/kvtune"
    finally:
        subprocess.run([*as_user, str(pg / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def launched_script(script: Path, port: int, timeout_s: float = 300):
    """Start a generated launch script (its own process group), wait for /health, stop it."""
    import os
    import signal
    import subprocess
    import time

    import httpx

    proc = subprocess.Popen(["bash", str(script)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert proc.poll() is None, "launch script exited"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
