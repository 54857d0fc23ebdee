"""One `kvtune run` as library code (tuner/session.py), up to the point where trials would run:
the run's options checked, the spec from the study file and the flags, the combinations refused
before anything is opened, and an opened session's study and results.json (fake launcher, SQLite
in the test's folder; no trial is measured, so no server starts)."""

from __future__ import annotations

import json

import pytest

from kvtune.errors import SpecError
from kvtune.study.spec import StudySpec
from kvtune.study.time_spent import StudyTime, TimeSpent
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner import accounting, load_search
from kvtune.tuner.anchor import ANCHOR_ATTR
from kvtune.tuner.budget import Budget
from kvtune.tuner.events import Callbacks
from kvtune.tuner.session import RunOptions, open_session, study_spec
from tests.conftest import TINY


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (RunOptions(workers=0), "workers must be at least 1, got 0"),
        (RunOptions(gpus_per_trial=-1), "gpus_per_trial must be 0 or more, got -1"),
    ],
)
def test_impossible_run_options_are_refused(options, message):
    with pytest.raises(SpecError, match=f"^{message}$"):
        options.validate()


def test_the_spec_is_the_study_file_then_the_flags_over_the_defaults(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("study: from-file\ntrials: 5\nworkload:\n  concurrency: 3\n  output_tokens: 9\n")
    spec = study_spec(RunOptions(study_file=f, given={"trials": 9, "workload": {"concurrency": 6}}))
    assert (spec.study, spec.trials, spec.workload.concurrency, spec.workload.output_tokens) == ("from-file", 9, 6, 9)
    assert study_spec(RunOptions()).trials == StudySpec().trials  # no file, no flags: the defaults


def spec(**kw) -> StudySpec:
    return StudySpec(**{"study": "s", "trials": 3, "workload": TINY, "startup_timeout_s": 20, **kw}).validate()


def test_a_grid_study_with_several_workers_is_refused_before_anything_is_opened(tmp_path):
    opts = RunOptions(workers=2, runs_dir=str(tmp_path / "runs"))
    with pytest.raises(SpecError, match="sampler grid measures one config at a time"):
        open_session(opts, spec(sampler="grid"), Callbacks(), launcher=FakeLauncher())
    assert not (tmp_path / "runs").exists()


def test_relative_targets_with_several_workers_are_refused(tmp_path):
    opts = RunOptions(workers=2, runs_dir=str(tmp_path / "runs"))
    prepared: list = []
    with pytest.raises(SpecError, match="need the baseline measured first"):
        open_session(opts, spec(targets=["ttft<0.8x"]), Callbacks(), prepared.append, launcher=FakeLauncher())
    assert prepared == []  # refused before the CLI's header


def test_an_opened_session_of_its_own_study_stores_no_budget_and_writes_results_json(tmp_path):
    opts = RunOptions(runs_dir=str(tmp_path / "runs"))
    prepared: list = []
    s = open_session(opts, spec(time_budget_s=600.0), Callbacks(), prepared.append, launcher=FakeLauncher())
    assert [p.study_name for p in prepared] == ["s"] and s.results_path.parent == s.prepared.run_dir
    # no other worker reads them: the budget is the spec's, the clock starts with the loop
    assert accounting.BUDGET_ATTR not in s.tuner.study.user_attrs
    assert accounting.CLOCK_ATTR not in s.tuner.study.user_attrs
    assert s.tuner.space.size() == 6 and s.planned_trials == 3  # speed x bogus: --trials is the smaller
    assert s.storage_url.startswith("sqlite:///") and s.workers == []
    path = s.write_results()
    payload = json.loads(path.read_text())
    assert payload["study"] == "s" and payload["trials"] == [] and payload["best_trial"] is None
    assert payload["spec"]["trials"] == 3 and payload["backend_version"] == "fake-server 1.0"


def test_a_session_with_workers_stores_its_budget_and_starts_the_clock_before_they_start(tmp_path):
    opts = RunOptions(runs_dir=str(tmp_path / "runs"), workers=2)
    s = open_session(opts, spec(time_budget_s=600.0), Callbacks(), launcher=FakeLauncher())
    assert accounting.load_budget(s.tuner.study, Budget(1)) == Budget(3, 600.0)
    assert accounting.CLOCK_ATTR in s.tuner.study.user_attrs  # the workers read both there
    assert s.workers == []  # not started yet: `start_workers` does


def test_results_json_counts_the_anchors_runs_and_the_load_search_and_reads_back_the_same(tmp_path):
    s = open_session(RunOptions(runs_dir=str(tmp_path / "runs")), spec(), Callbacks(), launcher=FakeLauncher())
    study = s.tuner.study
    assert json.loads(s.write_results().read_text())["time_spent"]["launches"] == 0  # nothing launched yet
    fresh = TimeSpent(startup_s=20.0, measurement_s=10.0, teardown_s=1.0).to_dict()
    study.set_user_attr(ANCHOR_ATTR, {"runs": [{"quiet": False, "time_spent": fresh}] * 2, "gave_up": True})
    study.set_user_attr(load_search.LOAD_ATTR, {"load": {"trial": 0, "held": 2.0}, "time_spent": fresh})
    failed = TimeSpent(startup_s=7.0).to_dict()  # a confirmation run whose launches never started
    accounting.keep_never_started(study, "confirmation", 0, [failed, failed])
    payload = json.loads(s.write_results().read_text())
    spent = payload["time_spent"]
    assert (spent["anchor"]["launches"], spent["load_search"]["launches"], spent["launches"]) == (2, 1, 5)
    assert spent["confirmation"]["launches"] == spent["never_started"] == 2
    assert spent["anchor"]["startup_s"] == 40.0 and spent["total_s"] == 93.0 + 14.0
    assert StudyTime.of_results(payload).to_dict() == spent  # what `kvtune show` and the report read


def test_a_model_whose_tokenizer_does_not_load_is_refused_before_anything_is_written(tmp_path):
    """The tokenizer is read in `prepare`, before the runs folder and the study are made: a set-up
    refused for its tokenizer.json left the study database and an empty runs folder behind."""
    from kvtune.tuner.session import set_up_only

    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")  # no model in it: the tokenizers library refuses it
    opts = RunOptions(setup_only=True, storage=f"sqlite:///{tmp_path / 's.db'}", runs_dir=str(tmp_path / "runs"))
    with pytest.raises(SpecError, match="cannot load tokenizer"):
        set_up_only(opts, spec(), launcher=FakeLauncher(model_path=str(model)))
    assert not (tmp_path / "runs").exists() and not (tmp_path / "s.db").exists()


def test_another_programs_sqlite_database_is_refused_before_anything_is_written(tmp_path):
    """A SQLite file with tables but none of Optuna's is another program's: Optuna added its
    tables beside them, silently; a file that is not SQLite at all is refused as such."""
    import sqlite3

    from kvtune.tuner.session import set_up_only

    db = tmp_path / "app.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE users (name TEXT)")
    opts = RunOptions(setup_only=True, storage=f"sqlite:///{db}", runs_dir=str(tmp_path / "runs"))
    with pytest.raises(SpecError, match=r"is the database of another program \(its tables: users\)"):
        set_up_only(opts, spec(), launcher=FakeLauncher())
    (tmp_path / "notes.db").write_text("not a database\n")
    opts = RunOptions(setup_only=True, storage=f"sqlite:///{tmp_path / 'notes.db'}", runs_dir=str(tmp_path / "runs"))
    with pytest.raises(SpecError, match="is not a SQLite database"):
        set_up_only(opts, spec(), launcher=FakeLauncher())
    assert not (tmp_path / "runs").exists()
    with sqlite3.connect(db) as c:
        assert [r[0] for r in c.execute("SELECT name FROM sqlite_master")] == ["users"]


def test_a_default_study_name_fits_a_folders_name():
    """A model file of a long name made a default study name whose folder could not be made
    (File name too long), after the runs folder was; the model's part is cut to fit."""
    from kvtune.tuner.assemble import default_study_name

    name = default_study_name(spec(study=None), FakeLauncher(model_path="/m/" + "m" * 300 + ".gguf"))
    assert len(name.encode()) == 255 and name.startswith("mmm") and name.endswith(f"-{spec().backend}-" + name[-8:])
    short = default_study_name(spec(study=None), FakeLauncher(model_path="/m/tiny.gguf"))
    assert short.startswith("tiny.gguf-") or short.startswith("tiny")
