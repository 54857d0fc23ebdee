"""Each setting declared once (kvtune/setting.py): the study file's keys and checks, `--set`,
the front door's flags, the moved flags' refusals, `kvtune settings` and docs/reference.md all
derive from the fields, so they cannot disagree."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from kvtune.cli.settings_list import reference_markdown
from kvtune.errors import SpecError
from kvtune.setting import doc_of
from kvtune.study.run_settings import RunSettings
from kvtune.study.settings import all_settings, by_key, moved_flag, parse_sets, set_hint, top_keys
from kvtune.study.spec import StudySpec, build_spec
from kvtune.workload import Workload

ROOT = Path(__file__).resolve().parents[3]
SECTIONS_NOT_SETTINGS = {"workload", "space"}  # a study file's sections, not single values


@pytest.mark.parametrize("record", [StudySpec, Workload, RunSettings])
def test_every_field_a_user_can_set_is_declared_with_its_help(record):
    for f in fields(record):
        if f.name in SECTIONS_NOT_SETTINGS:
            continue
        doc = doc_of(f)
        assert doc is not None, f"{record.__name__}.{f.name} has no setting() declaration"
        assert doc.help.strip() and "\n" not in doc.help


def test_keys_are_unique_and_the_study_file_takes_every_top_key():
    keys = [s.key for s in all_settings()]
    assert len(keys) == len(set(keys))
    assert "time_budget" in top_keys() and "time_budget_s" not in top_keys()  # the key, not the field
    assert {"workload", "space", "deploy_port", "storage"} <= top_keys()


def test_a_moved_flag_names_its_key_and_no_flag_moved_twice():
    seen: dict[str, str] = {}
    for s in all_settings():
        for flag in s.doc.moved:
            assert flag not in seen, f"{flag} moved to {seen.get(flag)} and {s.key}"
            seen[flag] = s.key
    assert moved_flag("--num-requests").key == "workload.num_requests"  # type: ignore[union-attr]
    assert set_hint(moved_flag("--no-fidelity-gate"), "--no-fidelity-gate") == "--set fidelity_gate=false"  # type: ignore[arg-type]
    assert set_hint(moved_flag("--speculative"), "--speculative") == "--set speculative=true"  # type: ignore[arg-type]
    assert moved_flag("--trials") is None  # still a flag


def test_set_reads_each_value_as_the_study_file_does():
    given = parse_sets(
        [
            "workload.num_requests=16",
            "turns=3",  # a workload key needs no prefix where it is not also a top key
            "workload.multiturn=true",
            "confirm_top=0",
            "fidelity_gate=false",
            "time_budget=90m",
            "workload.think_time_s=2s",
            "slo=ttft<2s,tpot<100ms",
            "repeats=auto",
            "objective=[output_throughput, ttft_p95]",
            "space.parallel=[1, 2]",
        ]
    )
    assert given["workload"] == {"num_requests": 16, "turns": 3, "multiturn": True, "think_time_s": 2.0}
    assert given["time_budget_s"] == 5400.0 and given["confirm_top"] == 0 and given["fidelity_gate"] is False
    assert given["slo"] == "ttft<2s,tpot<100ms" and given["repeats"] == "auto"
    assert given["space"] == {"parallel": [1, 2]}
    spec = build_spec({"space": {"flash-attn": ["on", "off"]}}, given)
    assert spec.space == {"flash-attn": ["on", "off"], "parallel": [1, 2]}  # one knob narrowed, the file's kept
    assert spec.workload.num_requests == 16 and [o.name for o in spec.objective] == ["output_throughput", "ttft_p95"]


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("num_request=16", "--set num_request: no such setting; did you mean workload.num_requests"),
        ("workload.num_requests=many", "workload.num_requests must be an integer, got 'many'"),
        ("workload.num_requests=", "--set workload.num_requests= has no value"),
        ("num_requests", "--set 'num_requests' is not KEY=VALUE"),
        ("=3", "is not KEY=VALUE"),
        ("fidelity_gate=maybe", "fidelity_gate must be true or false, got 'maybe'"),
        ("time_budget=soon", "time_budget 'soon' is not a duration"),
        ("workload=3", "--set workload: no such setting"),
        ("deploy_port=http", "deploy_port must be an integer, got 'http'"),
        ("model=", "has no value"),
        ("model=' '", "model is empty"),
        ("targets=[1, 2]", "targets must be a list of strings"),
    ],
)
def test_a_bad_set_is_one_line_naming_the_key(item, says):
    with pytest.raises(SpecError) as e:
        parse_sets([item])
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_reference_page_is_generated_from_the_declarations():
    page = (ROOT / "docs" / "reference.md").read_text()
    assert page == reference_markdown(), (
        "docs/reference.md is stale: run `kvtune settings --markdown > docs/reference.md`"
    )
    for s in all_settings():
        assert f"`{s.key}`" in page


def test_every_setting_has_a_default_of_its_type():
    for s in by_key().values():
        if s.default is None or s.default == ():
            continue
        assert s.check(s.default if not isinstance(s.default, tuple) else list(map(str, s.default))) is not None, s.key
