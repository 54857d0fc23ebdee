"""Settings that name a file, a folder or a program, checked by class of mistake (issue 41): a
path that is not there, one under a regular file, a folder where a file belongs, a file that is
not what the setting reads (random bytes, text given as a model, a GGUF cut short at any byte),
a program that cannot run, a runs folder that is a file or under one. Each goes through what
`kvtune run` does before anything starts or is written (`run_options`, the spec, the input files
read, the launcher built), given with `--set KEY=VALUE`; the refusal is one `KvtuneError` line naming the key or the path typed,
and nothing is written. A path refused opens with what the user typed: the flag, or the key of
`--set` and the study file. Every string setting is sorted below as a path of some kind or not one,
so a new one must be placed before this passes (then the classes cover it). A program whose
`--help` is not llama-server's is a property of tests/unit/launchers/test_is_llama_server.py (a
unit test runs no process) and rows of tests/integration/cli/test_bad_input_classes.py."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvtune.cli.flag_record import with_defaults
from kvtune.cli.run import model_as_typed, run_options
from kvtune.cli.run_flags import RunFlags
from kvtune.errors import KvtuneError
from kvtune.launchers.registry import create_launcher
from kvtune.study.settings import all_settings
from kvtune.tuner.assemble import check_input_files
from kvtune.tuner.multi_backend import parse_backends
from kvtune.tuner.session import study_spec
from tests.paths import UNIT_DATA

#: What each string setting that names something on disk reads.
PATHS = {
    "model": "gguf",
    "draft_model": "gguf",
    "llama_server": "program",
    "fidelity_prompts": "text",
    "workload.dataset": "file",
    "workload.trace": "file",
    "runs_dir": "folder",
}
#: String settings that are names, addresses or choices, not paths (checked by test_input_classes).
NOT_PATHS = {
    "study",
    "backend",
    "sampler",
    "slo",
    "vllm_python",  # the interpreter whose vLLM runs: probed ("vllm_python points to ..., which has no usable vLLM")
    "storage",
    "warm_start",
    "warm_start_storage",
    "deploy_host",
    "hf_model",
    "workload.mode",
    "workload.arrival",
    "workload.endpoint",
    "workload.trace_time_unit",
    "workload.trace_model",
    "workload.trace_log_type",
}
FILES = [k for k, kind in PATHS.items() if kind != "folder"]
EXAMPLES = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_every_string_setting_is_sorted_as_a_path_or_not():
    strings = {s.key for s in all_settings() if s.type_name.startswith("string")}
    assert strings == set(PATHS) | NOT_PATHS, strings ^ (set(PATHS) | NOT_PATHS)


def front(tmp: Path, key: str, value: Any) -> None:
    """What `kvtune run --set KEY=VALUE` does before anything starts or is written."""
    flags = {} if key == "runs_dir" else {"runs_dir": str(tmp / "runs")}
    opts = run_options(with_defaults(RunFlags, set=[f"{key}={value}"], **flags), parse_backends([]))
    spec = study_spec(opts)
    check_input_files(spec)
    create_launcher(spec)


def refused(tmp: Path, key: str, value: Any) -> str:
    before = listing(tmp)
    with pytest.raises(KvtuneError) as e:
        front(tmp, key, value)
    message = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in message, message
    assert key.rpartition(".")[2] in message or str(value) in message, (key, message)
    assert listing(tmp) == before and not (tmp / "runs").exists(), f"{key}: something was written"
    return message


def listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


@pytest.fixture
def places(tmp_path) -> Path:
    (tmp_path / "a-file").write_text("in the way\n")
    (tmp_path / "a-folder").mkdir()
    return tmp_path


@pytest.mark.parametrize("key", FILES)
@pytest.mark.parametrize("where", ["nope", "a-file/under", "a-folder"], ids=["not-there", "under-a-file", "a-folder"])
def test_a_file_not_there_under_a_file_or_a_folder_is_refused(places, key, where):
    refused(places, key, places / where)


@pytest.mark.parametrize("key", [k for k in FILES if PATHS[k] in ("gguf", "file")])
@EXAMPLES
@given(junk=st.binary(min_size=0, max_size=400))
def test_a_file_of_random_bytes_is_refused(tmp_path, key, junk):
    f = tmp_path / "junk.bin"
    f.write_bytes(junk)
    refused(tmp_path, key, f)


@EXAMPLES
@given(junk=st.binary(min_size=1, max_size=200))
def test_reference_prompts_that_are_not_text_are_refused(tmp_path, junk):
    f = tmp_path / "prompts.txt"
    f.write_bytes(b"\xff" + junk)  # never UTF-8
    refused(tmp_path, "fidelity_prompts", f)


@pytest.fixture(scope="module")
def whole_gguf(tmp_path_factory) -> bytes:
    """A whole GGUF of one small tensor, by gguf's own writer (cut short by the property)."""
    from gguf import GGUFWriter

    path = tmp_path_factory.mktemp("gguf") / "whole.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_tensor("t0", np.arange(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


@pytest.mark.parametrize("key", [k for k, kind in PATHS.items() if kind == "gguf"])
@EXAMPLES
@given(data=st.data())
def test_a_model_cut_short_at_any_byte_is_refused(tmp_path, whole_gguf, key, data):
    cut = data.draw(st.integers(0, len(whole_gguf) - 1))
    f = tmp_path / "cut.gguf"
    f.write_bytes(whole_gguf[:cut])
    refused(tmp_path, key, f)


@pytest.mark.parametrize("key", [k for k, kind in PATHS.items() if kind == "gguf"])
def test_text_given_as_a_model_is_refused(tmp_path, key):
    f = tmp_path / "model.gguf"
    f.write_text("not a model\n")
    refused(tmp_path, key, f)


def program(tmp: Path, help_text: str, executable: bool = True) -> Path:
    p = tmp / "server"
    quoted = help_text.replace("'", "'\\''")
    p.write_text(f"#!/bin/sh\nprintf '%s\\n' '{quoted}'\nexit 0\n")
    if executable:
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def test_llama_server_that_cannot_run_is_refused(tmp_path):
    help_text = (UNIT_DATA / "llama_server_help.txt").read_text()
    refused(tmp_path, "llama_server", program(tmp_path, help_text, executable=False))


@pytest.mark.parametrize("where", ["a-file", "a-file/runs"], ids=["a-file", "under-a-file"])
def test_a_runs_folder_that_is_a_file_or_under_one_is_refused(places, where):
    refused(places, "runs_dir", places / where)


def test_the_runs_folder_in_the_environment_is_checked_the_same(places, monkeypatch):
    before = listing(places)
    monkeypatch.setenv("KVTUNE_RUNS_DIR", str(places / "a-file" / "runs"))
    with pytest.raises(KvtuneError, match="which is a file, not a folder"):
        run_options(with_defaults(RunFlags), parse_backends([]))
    assert listing(places) == before


# ---- a path refused is read under what was typed: the flag, the --set key, the study-file key ----
def given(tmp: Path, way: str, key: str, value: str) -> RunFlags:
    """`kvtune run` given `key` as `value` one way: its flag, `--set KEY=VALUE` or a study file."""
    flags: dict[str, Any] = {} if key == "runs_dir" else {"runs_dir": str(tmp / "runs")}
    if way == "flag":
        flags[key] = value
    elif way == "--set":
        flags["set"] = [f"{key}={value}"]
    else:
        (tmp / "study.yaml").write_text(f"{key}: {value}\n")
        flags["study_file"] = str(tmp / "study.yaml")
    return with_defaults(RunFlags, **flags)


TYPED = [
    ("model", "flag", "--model"),
    ("model", "--set", "model"),
    ("model", "study file", "model"),
    ("draft_model", "--set", "draft_model"),  # no flag: a study-file key
    ("draft_model", "study file", "draft_model"),
    ("runs_dir", "flag", "--runs-dir"),
    ("runs_dir", "--set", "runs_dir"),
    ("runs_dir", "study file", "runs_dir"),
]


@pytest.mark.parametrize(("key", "way", "named"), TYPED, ids=[f"{k}-{w}" for k, w, _ in TYPED])
def test_a_path_refused_opens_with_what_was_typed(places, key, way, named):
    value = str(places / "a-file" / "under")
    f = given(places, way, key, value)
    choice = parse_backends([])
    with pytest.raises(KvtuneError) as e, model_as_typed(f, choice):  # as `kvtune run` reads the model
        create_launcher(study_spec(run_options(f, choice)))
    message = str(e.value)
    assert message.startswith(f"{named} {value!r} "), message
    rest = message.partition(" ")[2].replace(value, "")
    assert "pass " not in rest and "--" not in rest, f"names a way not typed: {message}"
