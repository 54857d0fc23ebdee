"""The study file (study/study_file.py): YAML read and type-checked at the edge, each bad file a
one-line SpecError that names the file and what to write, keys with no value left unset, a
`time_budget` in words, and a model path relative to the file. Files live in the test's own
tmp_path; the fuzzing of this loader is tests/unit/objectives/test_fuzz.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.errors import SpecError
from kvtune.objectives.targets import parse_target
from kvtune.study.identity import fingerprint
from kvtune.study.spec import build_spec
from kvtune.study.study_file import load_study_file, parse_workload
from kvtune.workload import Workload


def study(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    return f


def one_line_error(f: Path) -> str:
    with pytest.raises(SpecError) as e:
        load_study_file(f)
    text = str(e.value)
    assert "\n" not in text
    return text


def test_an_empty_file_sets_nothing(tmp_path):
    assert load_study_file(study(tmp_path, "")) == {}


def test_the_keys_a_file_sets_come_back_typed_and_a_key_without_value_is_not_set(tmp_path):
    f = study(tmp_path, "study: s\ntrials: 4\ntargets: ttft<1s\nseed:\nworkload:\n  concurrency: 2\n")
    targets = [parse_target("ttft<1s")]  # parsed once, in the file's check: the spec keeps them
    assert load_study_file(f) == {"study": "s", "trials": 4, "targets": targets, "workload": {"concurrency": 2}}


def test_time_budget_in_a_study_file(tmp_path):
    """(moved from tests/unit/tuner/test_budget_loop.py)"""
    f = study(tmp_path, "time_budget: 1h30m\n")
    assert load_study_file(f)["time_budget_s"] == 5400.0
    assert build_spec(load_study_file(f)).time_budget_s == 5400.0
    f.write_text("time_budget: soon\n")
    with pytest.raises(SpecError, match="^time_budget 'soon' is not a duration"):
        load_study_file(f)


def test_a_relative_model_path_is_relative_to_the_study_file(tmp_path):
    (tmp_path / "models").mkdir()
    assert load_study_file(study(tmp_path, "model: models/m.gguf\n"))["model"] == str(tmp_path / "models" / "m.gguf")
    assert load_study_file(study(tmp_path, "model: /abs/m.gguf\n"))["model"] == "/abs/m.gguf"
    assert load_study_file(study(tmp_path, "model: demo\n"))["model"] == "demo"  # the built-in demo model


def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.yaml"
    assert one_line_error(missing) == f"study file {str(missing)!r} does not exist"


def test_invalid_yaml_says_the_line(tmp_path):
    text = one_line_error(study(tmp_path, "study: s\ntrials: [1\n"))
    assert "is not valid YAML at line" in text


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- a\n- b\n", "must be a mapping of keys, not list"),
        ("colour: red\n", "unknown key(s) ['colour']; allowed: "),
        ("trials: many\n", "trials must be an integer, got 'many'"),
        ("trials: true\n", "trials must be an integer, got True"),  # a bool is no integer
        ("informed_start: 1\n", "informed_start must be true or false, got 1"),
        ("targets: [1, 2]\n", "targets must be a list of strings"),
        ("workload: 3\n", "workload must be a mapping"),
        ("workload:\n  users: 3\n", "workload has unknown key(s) ['users']"),
        ("space: [a]\n", "space must be a mapping of flag name -> values"),
    ],
)
def test_a_bad_file_is_one_line_that_says_what_to_write(tmp_path, text, fragment):
    assert fragment in one_line_error(study(tmp_path, text))


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"concurrency": 1.5}, "workload.concurrency must be an integer, got 1.5"),
        ({"rate": "fast"}, "workload.rate must be a number, got 'fast'"),
        ({"mode": 1}, "workload.mode must be a string, got 1"),
        ({"dataset": 3}, "workload.dataset must be a file path, got 3"),
        ({"dataset_max_tokens": 1.5}, "workload.dataset_max_tokens must be an integer, got 1.5"),
        ({"burstiness": "high"}, "workload.burstiness must be a number, got 'high'"),
        ({"multiturn": "yes"}, "workload.multiturn must be true or false, got 'yes'"),
        ({"think_time_s": "soon"}, "workload.think_time_s 'soon' is not a duration"),
    ],
)
def test_parse_workload_checks_each_fields_type(raw, fragment):
    """Each key is checked by its setting's declared type (kvtune/setting.py), as `--set` is."""
    with pytest.raises(SpecError, match="^" + fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_workload(raw)


def test_parse_workload_accepts_the_optional_ones_unset_and_builds_a_workload():
    w = parse_workload({"concurrency": 3, "rate": None, "duration_s": None, "dataset": None, "request_timeout_s": 5})
    assert w == Workload(concurrency=3, request_timeout_s=5)


def test_an_unreadable_target_is_a_study_file_error_naming_the_key(tmp_path):
    # found by the fuzz test: `targets: ''` escaped as a TargetError, not the file's SpecError
    f = tmp_path / "study.yaml"
    f.write_text("targets: ''\n")
    with pytest.raises(SpecError, match=r"^targets has an empty item: give "):
        load_study_file(f)


def test_speculative_decoding_keys_a_relative_draft_model_and_the_name_only_they_change(tmp_path):
    f = study(tmp_path, "draft_model: models/small.gguf\nspeculative: true\n")
    data = load_study_file(f)
    assert data == {"draft_model": str(tmp_path / "models" / "small.gguf"), "speculative": True}
    spec, plain = build_spec(data), build_spec({})
    assert spec.to_dict()["draft_model"] == data["draft_model"] and spec.to_dict()["speculative"] is True
    assert "draft_model" not in plain.to_dict() and "speculative" not in plain.to_dict()
    assert fingerprint(spec) != fingerprint(plain) != fingerprint(build_spec({"speculative": True}))
    f.write_text("speculative: sometimes\n")
    assert "speculative" in one_line_error(f)


def test_a_workload_key_with_no_value_is_not_set_as_at_the_top():
    assert parse_workload({"burstiness": None, "concurrency": 3}) == parse_workload({"concurrency": 3})
