"""A cluster study end to end (issue 31): set up on one host with `kvtune run --setup-only`,
finished and confirmed by `kvtune worker`s with other core counts (taskset: 2 CPUs and 1 CPU)
through a PostgreSQL restart, all real: the kvtune CLI, llama-server with the demo model, a
PostgreSQL the test owns (tests/postgres.py) and stops mid-study. A worker with fewer CPUs than
the study's trials get is refused in one line before it starts anything.

The two workers share the cores on purpose (one each); they are told they are one family
(`KVTUNE_FAMILY_PID`, as `kvtune run --workers 2` tells its workers), so each other's servers are
the study, not interference."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from kvtune.tuner.fleet.confirmer import CONFIRMED_ATTR
from kvtune.tuner.records import VERDICT_ATTR
from tests.e2e.conftest import SMALL, kvtune
from tests.postgres import PostgresServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::ResourceWarning")]  # polls reopen the storage
TRIALS = 3
# SMALL, with the confirmation on (a later --set wins): one leader re-measured, then at most 2
# pairs against the defaults.
WORKLOAD = [*SMALL, "--set", "confirm_top=1", "--set", "confirm_pairs=2"]


def _worker(cpus: str, url: str, study: str, runs: Path) -> subprocess.Popen:
    env = {**os.environ, "KVTUNE_STORAGE": url, "KVTUNE_FAMILY_PID": str(os.getpid())}
    argv = ["taskset", "-c", cpus, sys.executable, "-m", "kvtune.cli", "worker", "--study", study]
    return subprocess.Popen(
        [*argv, "--runs-dir", str(runs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _complete(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    try:
        s = optuna.load_study(study_name=study, storage=url)
    except Exception:  # the server is restarting
        return []
    return [t for t in s.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]


@pytest.fixture
def pg():
    server = PostgresServer()
    yield server
    server.remove()


def _need_taskset_and_two_cpus() -> None:
    if shutil.which("taskset") is None:
        pytest.skip("taskset (util-linux) is not installed")
    if not {0, 1} <= set(os.sched_getaffinity(0)):
        pytest.skip("the workers are pinned to CPUs 0 and 1: this process may not run on both")


def test_a_set_up_study_is_finished_and_confirmed_by_workers_of_other_core_counts(tmp_path, pg, llama_server):
    _need_taskset_and_two_cpus()
    study_file = tmp_path / "cluster.yaml"
    study_file.write_text("space:\n  parallel: [1, 2]\n")
    setup = kvtune(
        "run",
        "--study-file",
        str(study_file),
        "--setup-only",
        "--storage",
        pg.url,
        "--study",
        "cluster",
        "--set",
        "cpus_per_trial=1",
        "--trials",
        str(TRIALS),
        "--runs-dir",
        str(tmp_path / "login"),
        *WORKLOAD,
        cwd=tmp_path,
    )
    assert setup.returncode == 0, setup.stderr
    workers = [_worker("0,1", pg.url, "cluster", tmp_path / "a"), _worker("1", pg.url, "cluster", tmp_path / "b")]
    try:
        deadline = time.monotonic() + 600
        while not _complete(pg.url, "cluster") and time.monotonic() < deadline:
            time.sleep(1)
        assert _complete(pg.url, "cluster"), "no trial finished"
        pg.stop()  # mid-study: the workers ride it out (retries), nothing is lost
        time.sleep(5)
        pg.start()
        outs = [w.communicate(timeout=1200) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    codes = [w.returncode for w in workers]
    assert all(c in (0, 1) for c in codes), (codes, [err[-2000:] for _, err in outs])

    study = optuna.load_study(study_name="cluster", storage=pg.url)
    done = _complete(pg.url, "cluster")
    configs = [t for t in done if t.user_attrs["outcome"]["duplicate_of"] is None]
    assert len(configs) == TRIALS  # every config measured once, the baseline included
    assert not [
        t for t in study.trials if t.state in (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)
    ]
    assert {t.user_attrs["hardware"]["cpus"] for t in configs} == {1}  # one class: 1 CPU per trial
    # each trial also records its own host's CPUs: the 2-CPU worker's or the 1-CPU worker's
    assert {t.user_attrs["hardware"]["host_cpus"] for t in configs} <= {1, 2}
    assert VERDICT_ATTR in study.user_attrs and CONFIRMED_ATTR in study.user_attrs
    shown = kvtune("show", "cluster", "--storage", pg.url, cwd=tmp_path)
    assert shown.returncode == 0 and "not confirmed yet" not in shown.stdout, shown.stdout + shown.stderr
    # what an operator sees (pytest -s): each worker's last lines, then kvtune show
    for name, code, (out, err) in zip(("2-CPU worker", "1-CPU worker"), codes, outs):
        print(f"\n--- {name}, exit {code}:\n" + "\n".join((out + err).strip().splitlines()[-6:]))
    print(f"\n--- kvtune show cluster --storage ...\n{shown.stdout}")


def test_a_worker_with_fewer_cpus_than_a_trial_gets_is_refused_before_it_starts_anything(tmp_path, pg, llama_server):
    _need_taskset_and_two_cpus()
    setup = kvtune(
        "run",
        "--setup-only",
        "--storage",
        pg.url,
        "--study",
        "wide",
        "--set",
        "cpus_per_trial=2",
        "--runs-dir",
        str(tmp_path / "login"),
        *SMALL,
        cwd=tmp_path,
    )
    assert setup.returncode == 0, setup.stderr
    w = _worker("0", pg.url, "wide", tmp_path / "a")
    out, err = w.communicate(timeout=300)
    assert w.returncode == 2, (out, err)
    assert "this worker has 1 CPU(s), the study's trials get 2" in err
    assert not (tmp_path / "a").exists()  # nothing written, no server started
    assert not _complete(pg.url, "wide")
