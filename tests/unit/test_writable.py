"""Places kvtune will write, checked before anything starts (writable.py; issue 41): a folder or
file under a regular file, at any depth, is refused naming the file in the way; a folder that is
read-only to this user (os.access: the tests run as root, where the mode bits stop nothing, so
the answer is injected) is refused; an output that is a folder, or in a folder that is not there,
is refused; a usable place passes and nothing is created by the check."""

from __future__ import annotations

import os
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtune.errors import SpecError
from kvtune.tuner.store.storage import check_runs_root, runs_root
from kvtune.writable import check_file, check_folder

PARTS = st.lists(st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=8), max_size=4).filter(
    lambda parts: all(p not in (".", "..") for p in parts)
)


@settings(max_examples=100, deadline=None)
@given(PARTS)
def test_anything_under_a_regular_file_is_refused_at_any_depth(tmp_path_factory, parts):
    d = tmp_path_factory.mktemp("w")
    blocker = d / "a-file"
    blocker.write_text("x")
    target = blocker.joinpath(*parts)
    with pytest.raises(SpecError, match="--runs-dir .*(is a file|which is a file), not a folder"):
        check_folder(target, "--runs-dir")
    with pytest.raises(SpecError, match=f"--output .* cannot be written: {blocker} is a file|is a file"):
        check_file(target / "report.html", "--output")
    assert sorted(p.name for p in d.iterdir()) == ["a-file"]


@settings(max_examples=50, deadline=None)
@given(PARTS)
def test_a_usable_place_passes_and_the_check_creates_nothing(tmp_path_factory, parts):
    d = tmp_path_factory.mktemp("w")
    assert check_folder(d.joinpath(*parts), "--runs-dir") == d.joinpath(*parts)
    assert check_file(d / "report.html", "--output") == d / "report.html"
    assert not list(d.iterdir())


def test_a_read_only_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(SpecError, match=r"--runs-dir '.*' is not writable \(it would be made in .*\): read-only"):
        check_folder(tmp_path / "runs", "--runs-dir")
    with pytest.raises(SpecError, match="--output '.*' is not writable: read-only to this user"):
        check_file(tmp_path / "r.html", "--output")


def test_an_output_that_is_a_folder_or_in_no_folder_is_refused(tmp_path):
    with pytest.raises(SpecError, match="is a folder: give a file name in it"):
        check_file(tmp_path, "--output")
    with pytest.raises(SpecError, match="folder .*nope does not exist; create it first"):
        check_file(tmp_path / "nope" / "r.html", "--output")
    with pytest.raises(SpecError, match="^--output is empty"):
        check_file("", "--output")


def test_the_runs_folder_is_named_by_where_it_came_from(tmp_path, monkeypatch):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SpecError, match="^--runs-dir is empty"):
        runs_root("")
    with pytest.raises(SpecError, match="^runs_dir "):  # the key: `kvtune run` names --runs-dir when typed
        check_runs_root(str(tmp_path / "f" / "runs"))
    monkeypatch.setenv("KVTUNE_RUNS_DIR", str(tmp_path / "f"))
    with pytest.raises(SpecError, match="^KVTUNE_RUNS_DIR "):
        check_runs_root(None)


def test_a_place_to_write_that_is_no_regular_file_is_refused(tmp_path):
    """A named pipe blocked the write until something read it; a device (as root) would be
    replaced by a rename over it or chmod-ed by the script written there."""
    pipe = tmp_path / "out.pipe"
    os.mkfifo(pipe)
    with pytest.raises(SpecError, match=r"^--output '.*out\.pipe' is a named pipe \(FIFO\), not a file"):
        check_file(pipe, "--output")
    with pytest.raises(SpecError, match=r"^--save '/dev/null' is a character device, not a file"):
        check_file("/dev/null", "--save")


def test_a_name_longer_than_a_file_system_takes_is_refused_before_any_call():
    """pathlib's is_dir() raised OSError (File name too long) for it: a traceback."""
    with pytest.raises(SpecError, match=r"^--output '.*' has a name of 300 bytes \(nnn"):
        check_file("/tmp/" + "n" * 300 + "/r.html", "--output")
    check_file("/tmp/" + "n" * 255, "--output")  # at the limit: refused, if at all, by the file system
