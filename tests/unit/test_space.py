"""Search-space rules for llama-server and the study-file parser."""

import optuna
import pytest

from kvtune.bench.workload import Workload
from kvtune.errors import SpecError
from kvtune.launchers.base import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher, render_flags, slot_context_choices
from kvtune.tuner.space import SearchSpace
from kvtune.tuner.spec import build_spec, load_study_file, merge_knobs

W = Workload(prompt_tokens=200, output_tokens=64)
LAUNCHER = LlamaServerLauncher(binary="/usr/bin/llama-server", model_path="/m/model.gguf")


def _suggest_many(knobs, n=60):
    space = SearchSpace(knobs, LAUNCHER)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    out = []
    for _ in range(n):
        t = study.ask()
        out.append(space.suggest(t))
        study.tell(t, 0.0)
    return out


def test_slot_context_never_below_request_length():
    choices = slot_context_choices(W)
    assert min(choices) >= W.request_tokens
    assert choices == (512, 1024, 2048)
    for c in _suggest_many(LAUNCHER.default_knobs(W, 2)):
        argv = render_flags(c.flags)
        ctx = int(argv[argv.index("--ctx-size") + 1])
        parallel = int(argv[argv.index("--parallel") + 1])
        assert ctx % parallel == 0 and ctx // parallel >= W.request_tokens
        assert LAUNCHER.precheck(c, W) is None


def test_ctx_size_is_per_slot_times_slots_and_both_are_passed():
    argv = render_flags({"parallel": 4, "ctx-per-slot": 4096})
    assert argv == ["--parallel", "4", "--ctx-size", "16384"]


def test_quantized_v_cache_only_with_flash_attention():
    for c in _suggest_many(LAUNCHER.default_knobs(W, 2)):
        if c.flags["flash-attn"] == "off":
            assert c.flags["cache-type-v"] == "f16"
    bad = Candidate(flags={"flash-attn": "off", "cache-type-v": "q8_0"})
    assert "flash-attn" in LAUNCHER.precheck(bad, W)


def test_precheck_rejects_small_fixed_ctx_size():
    c = Candidate(flags={"parallel": 8, "ctx-size": 2048})  # 256 per slot < 264
    assert "per-slot context 256" in LAUNCHER.precheck(c, W)


def test_switches_render_positive_and_negative_forms():
    assert render_flags({"cont-batching": True}) == ["--cont-batching"]
    assert render_flags({"cont-batching": False}) == ["--no-cont-batching"]
    assert render_flags({"mlock": False}) == []
    assert render_flags({"mlock": True}) == ["--mlock"]


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


@pytest.mark.parametrize("body,fragment", [
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
])
def test_bad_study_files_are_one_line_errors(tmp_path, body, fragment):
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(SpecError) as e:
        build_spec(load_study_file(f), {})
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_missing_study_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_study_file(tmp_path / "nope.yaml")


def test_all_fixed_space_is_empty():
    with pytest.raises(SpecError, match="search space is empty"):
        merge_knobs(LAUNCHER.default_knobs(W, 2), {k.name: 1 for k in LAUNCHER.default_knobs(W, 2)})


def test_shipped_study_files_load():
    from pathlib import Path
    files = sorted((Path(__file__).parents[2] / "studies").glob("*.yaml"))
    assert files
    for f in files:
        spec = build_spec(load_study_file(f), {})
        merge_knobs(LAUNCHER.default_knobs(spec.workload, 2), spec.space)
