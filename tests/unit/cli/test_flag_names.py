"""A refusal names what the user typed (issue 41): a value given by a flag is refused under the
flag (`--output-tokens must be at least 1`), not the study file's key, for every workload count a
flag sets and any value below its least; the same value from the study file keeps the key; and
every flag that names a file, folder, program or address refuses an empty value by name. No
server, no process: `run_options` builds and checks the spec only."""

from __future__ import annotations

from dataclasses import fields
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtune.cli import flag_names
from kvtune.cli.flag_names import (
    KEY_FLAGS,
    check_llama_server_flag,
    check_vllm_python_flag,
    flag_of,
    flags_given,
    named_by_flag,
)
from kvtune.cli.flag_record import with_defaults
from kvtune.cli.run import NOT_EMPTY, refuse_empty, run_options
from kvtune.cli.run_flags import RunFlags
from kvtune.errors import ServerNotFoundError, SpecError
from kvtune.launchers.llama_binary import find_llama_server
from kvtune.launchers.vllm.installed import has_vllm
from kvtune.tuner.multi_backend import parse_backends
from tests.paths import UNIT_DATA

#: Workload counts a flag of the front door sets, with the least value the workload takes.
COUNTS = {"concurrency": 1, "prompt_tokens": 1, "output_tokens": 1}
#: Workload counts given with --set, with their least: refused under their key.
SET_COUNTS = {"num_requests": 1, "warmup_requests": 0, "shared_prefix_tokens": 0}
#: The workload fields `kvtune run`'s flags set (cli/run.py given_by_flags).
SET_BY_FLAGS = [*COUNTS, "rate", "mode", "dataset", "trace", "multiturn"]
OPTIONS = {d for f in fields(RunFlags) for d in getattr(f.metadata["flag"], "param_decls", ()) or ()}


def refused(tmp_path, **flags) -> str:
    with pytest.raises(SpecError) as e:
        run_options(with_defaults(RunFlags, runs_dir=str(tmp_path), **flags), parse_backends([]))
    return str(e.value)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(COUNTS)), st.integers(-(10**6), -1))
def test_a_count_below_its_least_is_refused_under_the_flag_typed(tmp_path_factory, name, below):
    value = COUNTS[name] + below
    message = refused(tmp_path_factory.mktemp("runs"), **{name: value})
    assert message.startswith(f"{flag_of(RunFlags, name)} must be "), message
    assert f"got {value}" in message and "workload." not in message.split(":")[0]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(SET_COUNTS)), st.integers(-(10**6), -1))
def test_a_count_given_with_set_is_refused_under_its_key(tmp_path_factory, name, below):
    value = SET_COUNTS[name] + below
    message = refused(tmp_path_factory.mktemp("runs"), set=[f"workload.{name}={value}"])
    assert message.startswith(f"workload.{name} must be "), message


def test_settings_given_with_set_are_named_by_their_keys(tmp_path):
    assert refused(tmp_path, set=["shared_prefix_groups=0"]).startswith("workload.shared_prefix_groups must be")
    assert refused(tmp_path, set=["think_spread=0.5"]).startswith("workload.think_spread applies to multi-turn only")
    assert refused(tmp_path, set=["seed=-1"]).startswith("seed must be between 0 and 2**32-1")
    assert refused(tmp_path, set=["confirm_top=-1"]).startswith("confirm_top must be 0 or more")
    assert refused(tmp_path, workload_kind="multiturn", set=["turns=0"]).startswith("workload.turns must be at least 1")
    assert refused(tmp_path, set=["deploy_port=0"]).startswith("deploy_port must be a TCP port")
    assert refused(tmp_path, workers=0).startswith("--workers must be at least 1")  # a flag: named as typed


def test_the_same_value_from_the_study_file_keeps_the_key(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("workload:\n  output_tokens: -64\n")
    assert refused(tmp_path, study_file=str(f)).startswith("workload.output_tokens must be at least 1")
    f.write_text("workload:\n  output_tokens: 32\n")  # the flag wins over the file, and is named
    assert refused(tmp_path, study_file=str(f), output_tokens=-3).startswith("--output-tokens must be")


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(SET_BY_FLAGS), st.just(1), min_size=1),
    st.sampled_from([" must be at least 1", ": drop it", " applies to", ""]),
)
def test_a_line_opening_with_a_key_a_flag_gave_opens_with_that_flag(given_fields, rest):
    flags = flags_given({"workload": given_fields})
    for name in given_fields:
        flag = KEY_FLAGS.get(f"workload.{name}", "--" + name.replace("_", "-"))
        assert named_by_flag(f"workload.{name}{rest}", flags) == flag + rest
        assert flag in OPTIONS, f"workload.{name} is set by {flag}, which kvtune run does not take"
    assert named_by_flag("workload.trials_x must", flags) == "workload.trials_x must"  # not a key given


def test_every_renamed_key_names_a_flag_of_kvtune_run():
    assert set(KEY_FLAGS.values()) <= OPTIONS


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(NOT_EMPTY)), st.sampled_from(["", " ", "\t", "  \n"]))
def test_an_empty_path_name_or_address_is_refused_by_its_flag(name, blank):
    with pytest.raises(SpecError, match=f"^{flag_of(RunFlags, name)} is empty: give "):
        refuse_empty(with_defaults(RunFlags, **{name: blank}))


def test_a_llama_server_given_by_flag_is_refused_under_the_flag_and_by_key_under_the_key(tmp_path):
    """`kvtune worker`, `confirm` and `doctor --llama-server PATH`: the flag typed opens the
    refusal; the same path as the study's setting (`find_llama_server`) opens with its key."""
    text = tmp_path / "notes.txt"
    text.write_text("not a program")
    for path in (str(tmp_path / "nope"), str(tmp_path), str(text)):
        with pytest.raises(ServerNotFoundError) as flag:
            check_llama_server_flag(path)
        assert str(flag.value) == f"--llama-server points to {path!r}, which is not an executable file"
        with pytest.raises(ServerNotFoundError) as key:
            find_llama_server(path)
        assert str(key.value) == f"llama_server points to {path!r}, which is not an executable file"
    with pytest.raises(ServerNotFoundError, match="^--llama-server is empty: give the path"):
        check_llama_server_flag(" ")
    check_llama_server_flag(None)  # not given: the launcher finds one (KVTUNE_LLAMA_SERVER, PATH) later


def test_a_vllm_python_given_by_flag_is_refused_under_the_flag_and_by_key_under_the_key(monkeypatch):
    """`kvtune worker` and `confirm --vllm-python PATH`: the flag typed opens the refusal and the
    fix names no other way in (it said `--set vllm_python=PATH`, a flag neither takes); the same
    path as the study's setting opens with its key. The probe's answers are injected: a Python
    that cannot run, one without vLLM (recorded)."""
    no_vllm = (UNIT_DATA / "vllm_probe_no_vllm.txt").read_text()
    answers = {
        "/nope/python": (-1, "[Errno 2] No such file or directory: '/nope/python'"),
        "/usr/bin/python3": (0, no_vllm),
    }

    def run(argv: list[str], timeout_s: float = 0) -> tuple[int, str]:
        return answers[argv[0]]

    monkeypatch.setattr(flag_names, "has_vllm", partial(has_vllm, run=run, cache={}))
    for path, why in (("/nope/python", "cannot run /nope/python"), ("/usr/bin/python3", "ModuleNotFoundError")):
        with pytest.raises(ServerNotFoundError) as flag:
            check_vllm_python_flag(path)
        message = str(flag.value)
        assert message.startswith(f"--vllm-python points to {path!r}, which has no usable vLLM ({why}"), message
        assert "--set" not in message and "vllm_python" not in message.replace("--vllm-python", ""), message
        with pytest.raises(ServerNotFoundError) as key:
            has_vllm(path, run=run, cache={})
        assert str(key.value) == message.replace("--vllm-python", "vllm_python", 1)
    with pytest.raises(ServerNotFoundError, match="^--vllm-python is empty: give the Python that has vLLM"):
        check_vllm_python_flag(" ")
    check_vllm_python_flag(None)  # not given: kvtune/vllm_python.py's order picks one later
