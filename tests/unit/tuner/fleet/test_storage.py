"""The private Optuna API kvtune relies on, in one place: if an Optuna upgrade moves it, these
fail loudly here rather than as a hang or a silently lost heartbeat in a study."""

from __future__ import annotations

import sqlite3

import optuna
import pytest

from kvtune.tuner.store import storage

# ask/tell with heartbeats is what kvtune means to do; Optuna warns it is meant for optimize().
pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage")


def _study(tmp_path) -> optuna.Study:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    return optuna.create_study(study_name="s", storage=storage.make_storage(url))


def test_enqueued_trials_are_told_apart_from_sampled_ones(tmp_path):
    study = _study(tmp_path)
    study.enqueue_trial({"x": 1})
    queued = study.ask()
    sampled = study.ask()
    assert storage.was_enqueued(study, queued) is True
    assert storage.was_enqueued(study, sampled) is False


def test_frozen_reads_the_stored_trial(tmp_path):
    study = _study(tmp_path)
    trial = study.ask()
    trial.suggest_int("x", 1, 3)
    trial.set_user_attr("k", "v")
    frozen = storage.frozen(study, trial)
    assert frozen.number == trial.number and frozen.user_attrs == {"k": "v"} and "x" in frozen.params


def test_heartbeat_records_a_beat_for_the_running_trial(tmp_path):
    study = _study(tmp_path)
    trial = study.ask()
    with storage.heartbeat(study, trial):
        pass
    with sqlite3.connect(tmp_path / "study.db") as db:  # Optuna's own record of the beat
        beats = {row[0] for row in db.execute("SELECT trial_id FROM trial_heartbeats")}
    assert trial._trial_id in beats


@pytest.mark.parametrize("value", ["", " "])
def test_a_runs_folder_from_the_environment_set_to_nothing_is_refused(monkeypatch, value):
    """KVTUNE_RUNS_DIR='' silently meant ./kvtune-runs, and ' ' a folder named ' '; --runs-dir
    still wins over it."""
    from kvtune.errors import SpecError

    monkeypatch.setenv("KVTUNE_RUNS_DIR", value)
    with pytest.raises(SpecError, match="^KVTUNE_RUNS_DIR is set but empty"):
        storage.runs_root()
    assert str(storage.runs_root("elsewhere")) == "elsewhere"
