"""Fuzz the two parsers of user input: only the documented error type may ever escape."""

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtune.errors import SpecError, TargetError
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.objectives.targets import parse_target, parse_targets
from kvtune.study.space import merge_knobs
from kvtune.study.spec import build_spec
from kvtune.study.study_file import load_study_file

TARGET_ALPHABET = st.sampled_from(
    list("tfpoeilrw_<>=%.0123456789 smu-+eE/k")
    + ["ttft", "tpot", "itl", "e2el", "error_rate", "_p95", "_p99", "_mean", "ms", "s"]
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=30), st.lists(TARGET_ALPHABET, max_size=12).map("".join)))
def test_target_parser_raises_only_target_error(text):
    try:
        t = parse_target(text)
    except TargetError as e:
        assert "\n" not in str(e)
        return
    assert t.threshold >= 0 and t.op in ("<", "<=", ">", ">=")
    again = parse_target(t.constraint_key)  # the constraint's name is the same target
    assert (again.key, again.op, again.constraint_key) == (t.key, t.op, t.constraint_key)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=4))
def test_target_lists_raise_only_target_error(texts):
    try:
        targets = parse_targets(texts)
    except TargetError:
        return
    keys = [t.constraint_key for t in targets]
    assert len(set(keys)) == len(keys)  # no constraint can overwrite another


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
KEYS = st.sampled_from(
    [
        "study",
        "backend",
        "model",
        "targets",
        "objective",
        "trials",
        "seed",
        "workload",
        "space",
        "llama_server",
        "startup_timeout_s",
        "bogus",
        "concurrency",
        "prompt_tokens",
        "parallel",
        "threads",
        "low",
        "high",
        "step",
        "log",
        "num_requests",
        "request_timeout_s",
    ]
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)),
    max_leaves=15,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(VALUES, st.dictionaries(KEYS, VALUES, max_size=6)))
def test_study_file_loader_raises_only_spec_error(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("fuzz") / "study.yaml"
    f.write_text(yaml.safe_dump(data))
    launcher = LlamaServerLauncher(binary="/bin/true", model_path="/m.gguf")
    try:
        spec = build_spec(load_study_file(f))
        merge_knobs(launcher.default_knobs(spec.workload, 2), spec.space)
    except SpecError as e:
        assert "\n" not in str(e)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_study_file_loader_on_arbitrary_text(tmp_path_factory, text):
    f = tmp_path_factory.mktemp("fuzz") / "study.yaml"
    f.write_text(text)
    try:
        build_spec(load_study_file(f))
    except SpecError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["trials", "seed", "startup_timeout_s", "workload"]),
        st.one_of(SCALARS, st.dictionaries(KEYS, SCALARS, max_size=4)),
        min_size=1,
    )
)
def test_numeric_fields_raise_only_spec_error(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("fuzz") / "study.yaml"
    f.write_text(yaml.safe_dump(data))
    try:
        build_spec(load_study_file(f))
    except SpecError:
        pass
