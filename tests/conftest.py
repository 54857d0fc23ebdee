"""Shared fixtures: tiny workloads and a tuner built from the fake launcher (real processes,
real load client, real SQLite storage; only the model is fake). And the suite's rule for CI:
with KVTUNE_REQUIRE_E2E=1 (set by .ci/run) a skipped e2e test is a failure, so a machine missing
llama-server, vLLM, Chromium or PostgreSQL goes red instead of green with half the suite skipped."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import open_tuner, prepare
from kvtune.tuner.events import Callbacks
from kvtune.tuner.trial.disturbance import unwatched
from kvtune.workload import Workload

pytest_plugins = ["pytester"]  # tests of the hook below run pytest on tiny suites

REQUIRE_E2E = "KVTUNE_REQUIRE_E2E"


class RequireE2E:
    """Turns the skip of an e2e-marked test (in setup, call or teardown: a `pytest.skip` in a
    fixture, a skipif mark) and the skip of a whole tests/e2e module at collection into a failure
    that names the reason. An expected failure (xfail) stays what it is."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if report.skipped and not hasattr(report, "wasxfail") and item.get_closest_marker("e2e"):
            report.outcome = "failed"
            report.longrepr = _required(report.longrepr)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        outcome = yield
        report = outcome.get_result()
        if report.skipped and "e2e" in _relative(collector).parts:
            report.outcome = "failed"
            report.longrepr = _required(report.longrepr)


def _relative(node: pytest.Collector) -> Path:
    """The node's path below the rootdir (a checkout that lives under some "e2e" folder is not
    all e2e)."""
    path = Path(str(node.path))
    return path.relative_to(node.config.rootpath) if path.is_relative_to(node.config.rootpath) else path


def _required(longrepr: object) -> str:
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    reason = reason.removeprefix("Skipped: ")  # a module-level skip's text
    return f"e2e test skipped but {REQUIRE_E2E}=1 requires it to run: {reason}"


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(REQUIRE_E2E) == "1":
        config.pluginmanager.register(RequireE2E(), "kvtune-require-e2e")


# The e2e tests' ceiling (pyproject.toml's `timeout`, 120 s, is the unit tests'). Above the
# longest subprocess timeout an e2e test sets itself (tests/e2e/conftest.py: `kvtune` waits up to
# 1800 s), so that timeout fires first and names the command; a healthy e2e test takes minutes.
E2E_TIMEOUT_S = 3600


@pytest.hookimpl(trylast=True)  # after tests/e2e/conftest.py has marked its tests e2e
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("e2e") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))


TINY = Workload(
    concurrency=2, prompt_tokens=16, output_tokens=4, num_requests=4, warmup_requests=1, request_timeout_s=10
)


@pytest.fixture
def tiny_workload() -> Workload:
    return TINY


@pytest.fixture
def make_tuner(tmp_path: Path):
    """Build a Tuner over the fake launcher; returns (tuner, events)."""

    def build(
        spec: StudySpec | None = None,
        launcher: FakeLauncher | None = None,
        callbacks: Callbacks | None = None,
        bench: Any = None,
        monitor: Any = unwatched,
        **spec_kw,
    ):
        """`callbacks` replace the event collector; `bench` replaces the load client; `monitor`
        the interference monitor (none by default: a fake server's figures are no evidence, and on
        a loaded machine every trial would be re-measured)."""
        spec = spec or StudySpec(study="t", trials=4, workload=TINY, startup_timeout_s=20, **spec_kw).validate()
        events: list = []
        cb = callbacks or Callbacks(trial_finished=events.append)
        prepared = prepare(spec, launcher=launcher or FakeLauncher(), runs_dir=str(tmp_path / "runs"))
        return open_tuner(prepared, cb, monitor=monitor, **({"bench": bench} if bench else {})), events

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
    subprocess.run(
        [*as_user, str(pg / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_user,
            str(pg / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(data / "server.log"),
            "-w",
            "-o",
            f"-h 127.0.0.1 -p {port} -k {data}",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [str(pg / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "kvtune"],
            check=True,
            capture_output=True,
        )
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

    proc = subprocess.Popen(
        ["bash", str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
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
