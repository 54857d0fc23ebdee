"""llama-server's speculative knobs: spelled as the built binary's --help spells them (the
recorded current build: --spec-type, --spec-draft-model, --spec-draft-n-max; an older build:
-md/--model-draft and --draft-max, no n-gram mode), absent unless the study asks, and the draft
flags set only beside drafting with the draft model."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate
from kvtune.launchers.llama_binary import FALLBACK, LlamaDefaults, parse_help, parse_spec_types
from kvtune.launchers.llama_memory import draft_memory
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.launchers.llama_speculative import DRAFT_LENGTHS, LlamaSpeculation
from kvtune.planner.kv import ModelShape, kv_cache_bytes
from kvtune.workload import Workload
from tests.paths import UNIT_DATA

HELP = (UNIT_DATA / "llama_server_help.txt").read_text()
OLD_HELP = """\
-md,   --model-draft FNAME              draft model for speculative decoding (default: unused)
--draft-max, --draft, --draft-n N       number of tokens to draft for speculative decoding (default: 16)
--draft-min, --draft-n-min N            minimum number of draft tokens to use for speculative decoding
                                        (default: 0)
"""
DRAFT = "/models/draft.gguf"


def recorded() -> LlamaDefaults:
    return LlamaDefaults(parse_help(HELP), "test", parse_spec_types(HELP))


def test_the_recorded_build_is_read_as_spec_type_and_spec_draft_flags() -> None:
    spec = LlamaSpeculation.of(recorded())
    assert spec.draft_model_flag == "spec-draft-model" and spec.draft_max_flag == "spec-draft-n-max"
    assert spec.ngram_types == ("ngram-simple", "ngram-map-k", "ngram-mod") and "draft-simple" in spec.spec_types
    assert LlamaSpeculation.of(FALLBACK) == spec  # the fallback is that reading


def test_an_older_build_drafts_with_model_draft_and_has_no_ngram_mode() -> None:
    old = LlamaSpeculation.of(LlamaDefaults(parse_help(OLD_HELP), "old", parse_spec_types(OLD_HELP)))
    assert (old.draft_model_flag, old.draft_max_flag, old.spec_types) == ("model-draft", "draft-max", ())
    [model, length] = old.knobs(DRAFT, speculative=False)
    assert model.choices == (DRAFT, None) and length.choices == DRAFT_LENGTHS
    assert old.conditional("draft-max", {"model-draft": None}) == (False, None)
    with pytest.raises(SpecError, match="no n-gram speculation"):
        old.knobs(None, speculative=True)


def test_no_knob_unless_asked_and_ngram_modes_without_a_draft_model() -> None:
    spec = LlamaSpeculation.of(recorded())
    assert spec.knobs(None, speculative=False) == []
    [mode] = spec.knobs(None, speculative=True)
    assert mode.name == "spec-type" and mode.choices == ("none", "ngram-simple", "ngram-map-k", "ngram-mod")


def test_a_draft_model_is_tried_or_not_and_its_draft_length_tuned_only_beside_it() -> None:
    spec = LlamaSpeculation.of(recorded())
    mode, model, length = spec.knobs(DRAFT, speculative=False)
    assert mode.choices == ("none", "draft-simple") and model.kind == KnobKind.FIXED and model.value == DRAFT
    assert length.name == "spec-draft-n-max"
    assert spec.conditional("spec-draft-model", {"spec-type": "none"}) == (False, None)
    assert spec.conditional("spec-draft-n-max", {"spec-type": "draft-simple"}) == (True, None)
    assert spec.conditional("parallel", {"spec-type": "none"}) is None
    assert spec.knobs(DRAFT, speculative=True)[0].choices[-1] == "ngram-mod"


def test_the_launcher_renders_drafting_as_this_build_spells_it() -> None:
    lau = LlamaServerLauncher(binary="/x/llama-server", model_path="/m.gguf", defaults=recorded(), draft_model=DRAFT)
    names = [k.name for k in lau.default_knobs(Workload(), 2)]
    assert names[-3:] == ["spec-type", "spec-draft-model", "spec-draft-n-max"]
    assert lau.conditional("spec-draft-n-max", {"spec-type": "none"}) == (False, None)
    flags = {"spec-type": "draft-simple", "spec-draft-model": DRAFT, "spec-draft-n-max": 8}
    argv = lau.command(Candidate(flags=flags), 8080)
    assert argv[argv.index("--spec-type") + 1] == "draft-simple" and argv[argv.index("--spec-draft-model") + 1] == DRAFT
    assert argv[argv.index("--spec-draft-n-max") + 1] == "8"
    plain = LlamaServerLauncher(binary="/x/llama-server", model_path="/m.gguf", defaults=recorded())
    assert not any(k.name.startswith("spec") for k in plain.default_knobs(Workload(), 2))


def test_the_memory_pre_screen_counts_a_draft_model_only_beside_drafting(tmp_path) -> None:
    """The target (100 MiB) fits in 512 MiB alone; with a 400 MiB draft model and the draft's own
    KV (one slot's context) it does not, and the reason says the draft is in the sum."""
    draft = tmp_path / "draft.gguf"
    with open(draft, "wb") as out:  # a sparse file: its size is what the pre-screen reads
        out.truncate(400 << 20)
    target = ModelShape(layers=30, attention_heads=9, kv_heads=3, head_dim=64, weights_bytes=100 << 20)
    small = ModelShape(layers=4, attention_heads=4, kv_heads=1, head_dim=64, weights_bytes=400 << 20)
    lau = LlamaServerLauncher(
        binary="/x/llama-server",
        model_path="/absent.gguf",
        shape=target,
        memory_bytes=512 << 20,
        defaults=recorded(),
        draft_model=str(draft),
        draft_shape=small,
    )
    w = Workload(prompt_tokens=200, output_tokens=64)
    plain = {"parallel": 2, "ctx-per-slot": 1024, "spec-type": "none", "spec-draft-model": None}
    assert lau.precheck(Candidate(flags=plain), w) is None
    drafting = {**plain, "spec-type": "draft-simple", "spec-draft-model": str(draft), "spec-draft-n-max": 4}
    reason = lau.precheck(Candidate(flags=drafting), w)
    expected = draft_memory(drafting, "spec-draft-model", small, 1024)
    assert expected.weights == 400 << 20 and expected.kv == kv_cache_bytes(small, 1024, ("f16", "f16"))
    assert reason and "> memory 0.50 GiB" in reason
    assert reason.endswith("(weights include the draft model 0.39 GiB + its KV 0.00 GiB)")
