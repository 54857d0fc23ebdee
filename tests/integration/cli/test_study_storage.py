"""`kvtune show --storage` and `kvtune report --storage` on a study a worker elsewhere is still
filling: read from the storage itself (directly, and through `kvtune proxy`), nothing written."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import optuna
import pytest

from kvtune.launchers.process import free_port
from kvtune.tuner.store import storage
from kvtune.tuner.store.storage_proxy import StorageProxy

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")


def kvtune(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture(scope="module")
def running_study(tmp_path_factory):
    """A SQLite study with 3 told trials and one a worker on another host is measuring now."""
    d = tmp_path_factory.mktemp("watched")
    url = f"sqlite:///{d / 'study.db'}"
    driver = [sys.executable, "-m", "kvtune.testing.driver", "--runs-dir", str(d / "runs"), "--storage", url]
    subprocess.run([*driver, "--study", "watched", "--trials", "3"], check=True, capture_output=True, timeout=120)
    study = optuna.load_study(study_name="watched", storage=url)
    told = len(study.trials)
    in_flight = study.ask({"speed": optuna.distributions.CategoricalDistribution((1, 2, 4))})
    in_flight.set_user_attr("worker", {"host": "elsewhere", "pid": 1})
    return d, url, told


def digest(d) -> str:
    return hashlib.sha256((d / "study.db").read_bytes()).hexdigest()


@pytest.fixture(params=["direct", "proxy"])
def url(request, running_study):
    d, direct, _ = running_study
    if request.param == "direct":
        yield direct
        return
    port = free_port()
    proxy = StorageProxy(direct, "127.0.0.1", port)
    proxy.start()
    yield f"grpc://127.0.0.1:{port}"
    proxy.stop(grace_s=0)


def test_show_reads_a_running_study_from_its_storage_and_writes_nothing(running_study, url, tmp_path):
    d, _, told = running_study
    before = digest(d)
    r = kvtune("show", "watched", "--storage", url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "still running: 1 trial(s) in flight, 0 queued" in r.stdout
    assert f"{told} trials:" in r.stdout and "best: trial" in r.stdout
    assert digest(d) == before
    assert not (tmp_path / "kvtune-runs").exists()  # show keeps nothing here either


def test_report_from_the_storage_says_the_study_still_runs(running_study, url, tmp_path):
    r = kvtune("report", "watched", "--storage", url, "--output", str(tmp_path / "r.html"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "still running" in r.stdout and "watched" in (tmp_path / "r.html").read_text()


def test_an_unknown_study_in_the_storage_is_a_one_line_error(running_study, tmp_path):
    _, direct, _ = running_study
    r = kvtune("show", "nope", "--storage", direct, cwd=tmp_path)
    assert r.returncode == 2 and "no study 'nope'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_proxy_url_without_a_port_is_a_one_line_error(tmp_path):
    r = kvtune("worker", "--storage", "grpc://db-host", "--study", "x", cwd=tmp_path)
    assert r.returncode == 2 and "grpc://HOST:PORT" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_proxy_refuses_to_front_another_proxy(tmp_path):
    r = kvtune("proxy", "--storage", "grpc://db-host:13000", cwd=tmp_path)
    assert r.returncode == 2 and "not another proxy" in r.stderr


def test_a_busy_port_is_a_one_line_error(running_study, tmp_path):
    _, direct, _ = running_study
    port = free_port()
    busy = StorageProxy(direct, "127.0.0.1", port)
    busy.start()
    try:
        r = kvtune("proxy", "--storage", direct, "--port", str(port), cwd=tmp_path)
    finally:
        busy.stop(grace_s=0)
    assert r.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in r.stderr, r.stderr


def test_the_proxys_stored_study_is_the_databases(running_study):
    """A reader through the proxy sees the very trials the database holds."""
    _, direct, told = running_study
    port = free_port()
    proxy = StorageProxy(direct, "127.0.0.1", port)
    proxy.start()
    try:
        via = storage.load_study("watched", f"grpc://127.0.0.1:{port}", read_only=True)
        assert [t.number for t in via.trials] == list(range(told + 1))
    finally:
        proxy.stop(grace_s=0)


def test_a_port_out_of_range_is_a_one_line_error(tmp_path):
    r = kvtune("proxy", "--storage", "sqlite:///x.db", "--port", "70000", cwd=tmp_path)
    assert r.returncode == 2 and "--port must be in 1..65535" in r.stderr
