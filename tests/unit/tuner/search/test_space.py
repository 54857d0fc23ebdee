"""SearchSpace (conditional knobs, fixed knobs, environment knobs) and the study-file parser.
The llama-server launcher's own rules are tested in tests/unit/launchers/test_llama_server.py."""

import optuna
import pytest

from kvtune.errors import SpecError
from kvtune.knobs import Knob
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.study.space import merge_knobs
from kvtune.study.spec import build_spec
from kvtune.study.study_file import load_study_file
from kvtune.testing.sampling import suggest_many
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.workload import Workload
from tests.paths import STUDIES

W = Workload(prompt_tokens=200, output_tokens=64)
LAUNCHER = LlamaServerLauncher(binary="/usr/bin/llama-server", model_path="/m/model.gguf")


def _suggest_many(knobs, n=60):
    return suggest_many(knobs, LAUNCHER, n)


def test_conditional_forces_a_value_and_fixed_knobs_are_not_suggested():
    knobs = [
        Knob("flash-attn", "choices", choices=("on", "off")),
        Knob("cache-type-v", "choices", choices=("q8_0", "q4_0")),
        Knob("threads", "fixed", value=3),
        Knob("env:OMP_PROC_BIND", "choices", choices=("true",)),
    ]
    trial = optuna.trial.FixedTrial({"flash-attn": "off", "env:OMP_PROC_BIND": "true"})
    c = SearchSpace(knobs, LAUNCHER).suggest(trial)  # cache-type-v is forced, never asked
    assert c.flags == {"flash-attn": "off", "cache-type-v": "f16", "threads": 3}
    assert c.env == {"OMP_PROC_BIND": "true"}
    study = optuna.create_study()
    t = study.ask()
    SearchSpace(knobs, LAUNCHER).suggest(t)
    assert "threads" not in t.params


def test_study_file_fixes_narrows_removes_and_adds(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("""
space:
  parallel: [2, 4]
  threads: {low: 1, high: 2}
  flash-attn: "on"
  cont-batching: null
  mlock: [true, false]
""")
    knobs = {k.name: k for k in merge_knobs(LAUNCHER.default_knobs(W, 2), load_study_file(f)["space"])}
    assert knobs["parallel"].choices == (2, 4)
    assert knobs["threads"].kind == "int" and (knobs["threads"].low, knobs["threads"].high) == (1, 2)
    assert knobs["flash-attn"].kind == "fixed" and knobs["flash-attn"].value == "on"
    assert "cont-batching" not in knobs
    assert knobs["mlock"].choices == (True, False)
    for c in _suggest_many(list(knobs.values()), 10):
        assert c.flags["flash-attn"] == "on" and c.flags["parallel"] in (2, 4)


@pytest.mark.parametrize(
    "body,fragment",
    [
        ("trials: many", "trials must be an integer"),
        ("bogus: 1", "unknown key"),
        ("space: {parallel: []}", "empty list"),
        ("space: {threads: {low: 4, high: 2}}", "greater than high"),
        ("space: {threads: {low: 1}}", "needs both low and high"),
        ("space: {threads: {low: 1, high: 2, sep: 1}}", "unknown key"),
        ("workload: {concurrency: 0}", "at least 1"),
        ("workload: {users: 4}", "unknown key"),
        ("workload: {concurrency: two}", "must be an integer"),
        ("targets: [1]", "list of strings"),
        ("- a\n- b", "must be a mapping"),
        ("space: [1, 2]", "space must be a mapping"),
        ("a: [", "not valid YAML"),
    ],
)
def test_bad_study_files_are_one_line_errors(tmp_path, body, fragment):
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(SpecError) as e:
        build_spec(load_study_file(f))
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_missing_study_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_study_file(tmp_path / "nope.yaml")


def test_all_fixed_space_is_empty():
    with pytest.raises(SpecError, match="search space is empty"):
        merge_knobs(LAUNCHER.default_knobs(W, 2), {k.name: 1 for k in LAUNCHER.default_knobs(W, 2)})


def test_shipped_study_files_load():
    files = sorted(STUDIES.glob("*.yaml"))
    assert files
    for f in files:
        spec = build_spec(load_study_file(f))
        merge_knobs(LAUNCHER.default_knobs(spec.workload, 2), spec.space)
