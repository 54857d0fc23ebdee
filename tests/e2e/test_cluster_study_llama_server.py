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
from tests.e2e.conftest import SMALL, kvtune, small
from tests.postgres import PostgresServer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::ResourceWarning")]  # polls reopen the storage
TRIALS = 3
# SMALL, with the confirmation on: one leader re-measured, then at most 2 pairs against the defaults.
WORKLOAD = small("confirm_top=1", "confirm_pairs=2")


def _worker(cpus: str | None, url: str, study: str, runs: Path, extra_env: dict | None = None) -> subprocess.Popen:
    """`kvtune worker` on `cpus` (taskset; None: wherever it may run), the storage URL in its
    environment as a scheduler's job passes it."""
    env = {**os.environ, "KVTUNE_STORAGE": url, "KVTUNE_FAMILY_PID": str(os.getpid()), **(extra_env or {})}
    pin = ["taskset", "-c", cpus] if cpus else []
    argv = [*pin, sys.executable, "-m", "kvtune.cli", "worker", "--study", study]
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


def _held_by(url: str, study: str, host: str) -> list[optuna.trial.FrozenTrial]:
    """The RUNNING trials `host`'s worker holds now ([] while the storage has no such study)."""
    try:
        s = optuna.load_study(study_name=study, storage=url)
    except KeyError:
        return []
    running = s.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    return [t for t in running if (t.user_attrs.get("worker") or {}).get("host") == host]


def test_a_worker_killed_during_the_baseline_changes_nothing_but_time(tmp_path, pg, llama_server):
    """Issue 41 item 5: the worker measuring the baseline is SIGKILLed with its server up (another
    host as far as the study knows, so only its silent heartbeat tells); the survivor re-queues
    it while inside a trial of its own, measures it, finishes and confirms. The baseline is
    counted once, with its retry; and the verdict agrees with the table it prints: one that says
    no config (or none but the defaults) met the targets in the search has no such config in the
    table beside it, measured quiet or disturbed (the machine is loaded: trials may well be)."""
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
        "killed",
        "--trials",
        str(TRIALS),
        "--runs-dir",
        str(tmp_path / "login"),
        *WORKLOAD,
        cwd=tmp_path,
    )
    assert setup.returncode == 0, setup.stderr
    beats = {"KVTUNE_HEARTBEAT_S": "1", "KVTUNE_GRACE_S": "4"}
    victim = _worker(None, pg.url, "killed", tmp_path / "a", {**beats, "KVTUNE_WORKER_HOST": "host-a"})
    survivor = None
    try:
        deadline = time.monotonic() + 300
        held: list[optuna.trial.FrozenTrial] = []
        while time.monotonic() < deadline and victim.poll() is None:
            held = _held_by(pg.url, "killed", "host-a")
            if held and held[0].user_attrs.get("baseline") and list((tmp_path / "a").glob("*/server.pid*.json")):
                break  # its server is up: the kill lands mid-measurement
            time.sleep(0.2)
        assert held and held[0].user_attrs.get("baseline"), "the victim never measured the baseline"
        victim.kill()
        victim.communicate()
        killed = held[0].number
        survivor = _worker(None, pg.url, "killed", tmp_path / "b", {**beats, "KVTUNE_WORKER_HOST": "host-b"})
        out, err = survivor.communicate(timeout=1200)
    finally:
        for w in (victim, survivor):
            if w is not None and w.poll() is None:
                w.kill()
    assert survivor.returncode in (0, 1), err[-3000:]
    assert "Traceback" not in err, err[-3000:]

    study = optuna.load_study(study_name="killed", storage=pg.url)
    trials = study.trials
    assert trials[killed].state == optuna.trial.TrialState.FAIL and "outcome" not in trials[killed].user_attrs
    done = _complete(pg.url, "killed")
    baselines = [t for t in done if t.user_attrs["outcome"]["baseline"]]
    assert len(baselines) == 1  # the baseline counted once: its retry
    (retry,) = baselines
    assert retry.user_attrs.get("retry_of") == killed or retry.system_attrs.get("failed_trial") == killed
    configs = [t for t in done if t.user_attrs["outcome"]["duplicate_of"] is None]
    assert len(configs) == TRIALS  # every config measured once, the baseline's retry included
    assert not [t for t in trials if t.state in (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)]

    verdict = study.user_attrs[VERDICT_ATTR]
    assert verdict["baseline"] == retry.number  # compared with the measured defaults, not the killed attempt
    # what the table shows: each config met the targets in the search or not (disturbed or quiet)
    met = [t.number for t in configs if t.user_attrs["outcome"]["feasible"]]
    if "met the targets in the search" in verdict["reason"] and verdict["kind"] in ("NOTHING_MEETS", "DEFAULTS_ONLY"):
        others = [n for n in met if n != retry.number]
        assert not (others if verdict["kind"] == "DEFAULTS_ONLY" else met), (verdict["reason"], met)
    shown = kvtune("show", "killed", "--storage", pg.url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    print(f"\n--- survivor, exit {survivor.returncode}:\n" + "\n".join((out + err).strip().splitlines()[-8:]))
    print(f"\n--- kvtune show killed --storage ...\n{shown.stdout}")
