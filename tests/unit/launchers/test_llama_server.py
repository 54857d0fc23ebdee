"""LlamaServerLauncher without a server: the per-slot context rule, flag rendering, the V-cache
dependency on flash attention, precheck, the informed start and the container it runs in."""

import pytest

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate
from kvtune.launchers import llama_server
from kvtune.launchers.llama_binary import LlamaDefaults
from kvtune.launchers.llama_server import LlamaServerLauncher, render_flags, slot_context_choices
from kvtune.planner.kv import ModelShape
from kvtune.testing.sampling import suggest_many
from kvtune.workload import Workload

W = Workload(prompt_tokens=200, output_tokens=64)
LAUNCHER = LlamaServerLauncher(binary="/usr/bin/llama-server", model_path="/m/model.gguf")


def _suggest_many(knobs, n=60):
    return suggest_many(knobs, LAUNCHER, n)


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


def test_precheck_rejects_a_kv_cache_that_cannot_fit_in_memory():
    shape = ModelShape(layers=30, attention_heads=9, kv_heads=3, head_dim=64, weights_bytes=100 << 20)
    small = LlamaServerLauncher(
        binary="/x", model_path="/absent.gguf", shape=shape, memory_bytes=512 << 20, reserve_bytes=0
    )
    assert small.precheck(Candidate(flags={"parallel": 1, "ctx-per-slot": 512}), W) is None
    reason = small.precheck(Candidate(flags={"parallel": 16, "ctx-per-slot": 2048}), W)
    assert reason and "> memory 0.50 GiB" in reason


def test_switches_render_positive_and_negative_forms():
    assert render_flags({"cont-batching": True}) == ["--cont-batching"]
    assert render_flags({"cont-batching": False}) == ["--no-cont-batching"]
    assert render_flags({"mlock": False}) == []
    assert render_flags({"mlock": True}) == ["--mlock"]


def test_full_argv_is_binary_model_host_port_then_flags_in_order():
    c = Candidate(
        flags={
            "cache-type-k": "q8_0",
            "threads": 2,
            "parallel": 2,
            "ctx-per-slot": 512,
            "flash-attn": "on",
            "cont-batching": False,
        }
    )
    assert LAUNCHER.command(c, 8080, "0.0.0.0") == [
        "/usr/bin/llama-server",
        "--model",
        "/m/model.gguf",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--parallel",
        "2",
        "--ctx-size",
        "1024",
        "--threads",
        "2",
        "--flash-attn",
        "on",
        "--cache-type-k",
        "q8_0",
        "--no-cont-batching",
    ]
    assert LAUNCHER.served_model_name() == "model"
    assert LAUNCHER.request_extra_body() == {"cache_prompt": False}


def test_knob_kinds_are_enums_and_study_file_words_still_work():
    kinds = {k.name: k.kind for k in LAUNCHER.default_knobs(W, 4)}
    assert kinds["threads"] is KnobKind.INT and kinds["parallel"] is KnobKind.CHOICES
    from kvtune.knobs import Knob

    assert Knob("x", "fixed", value=1).kind is KnobKind.FIXED
    with pytest.raises(SpecError, match="unknown kind 'range'"):
        Knob("x", "range")


def test_informed_start_follows_the_seeds():
    knobs = LAUNCHER.default_knobs(Workload(concurrency=8, prompt_tokens=200, output_tokens=64), 4)
    guess = LAUNCHER.informed_start(knobs, Workload(concurrency=8, prompt_tokens=200, output_tokens=64))
    assert guess == {
        "parallel": 8,
        "ctx-per-slot": 512,
        "threads": 4,
        "batch-size": 2048,
        "ubatch-size": 512,
        "flash-attn": "on",
        "cache-type-k": "f16",
        "cache-type-v": "f16",
        "cont-batching": True,
    }
    for k in knobs:  # every value is one the space allows
        if k.kind == KnobKind.CHOICES:
            assert guess[k.name] in k.choices


def test_informed_start_skips_fixed_knobs_and_values_the_space_lacks():
    from kvtune.knobs import Knob

    knobs = [
        Knob("parallel", "choices", choices=(1, 2)),
        Knob("flash-attn", "choices", choices=("off",)),
        Knob("threads", "fixed", value=3),
        Knob("mlock", "choices", choices=(True, False)),
    ]
    assert LAUNCHER.informed_start(knobs, Workload(concurrency=8)) == {"parallel": 2}


def test_container_spec_mounts_the_model_and_picks_the_image_by_gpus():
    argv = LAUNCHER.command(Candidate(flags={"parallel": 2}), 9000, "0.0.0.0")
    spec = LlamaServerLauncher.container_spec(argv, gpus=0)
    assert spec.image == llama_server.IMAGE and spec.entrypoint is None and not spec.ipc_host
    assert spec.args == ("--model", "/models/model.gguf", "--host", "0.0.0.0", "--port", "9000", "--parallel", "2")
    assert spec.model_dir == "/m" and spec.gpus == 0
    gpu = LlamaServerLauncher.container_spec(["/x/llama-server", "-m", "/a/b.gguf"], gpus=2)
    assert gpu.image == llama_server.IMAGE_GPU and gpu.gpus == 2
    eq = LlamaServerLauncher.container_spec(["/x/llama-server", "--model=/a/b.gguf"], gpus=0)
    assert eq.args == ("--model=/models/b.gguf",) and eq.model_dir == "/a"
    with pytest.raises(SpecError, match="no model argument"):
        LlamaServerLauncher.container_spec(["/x/llama-server", "--port", "1"], gpus=0)


def test_cache_reuse_and_slot_similarity_are_tuned_only_where_prefixes_are_shared():
    names = {k.name for k in LAUNCHER.default_knobs(W, 2)}
    assert not {"cache-reuse", "slot-prompt-similarity"} & names  # synthetic prompts share nothing
    for reusing in (Workload(multiturn=True), Workload(trace="azure-conv")):
        knobs = {k.name: k for k in LAUNCHER.default_knobs(reusing, 2)}
        assert knobs["cache-reuse"].choices == (0, 64, 256)
        assert knobs["slot-prompt-similarity"].choices == (0.0, 0.1, 0.5)
    assert render_flags({"cache-reuse": 256, "slot-prompt-similarity": 0.5}) == [
        "--cache-reuse", "256", "--slot-prompt-similarity", "0.5",
    ]  # fmt: skip
    older = LlamaServerLauncher(binary="/b", model_path="/m.gguf", defaults=LlamaDefaults({"parallel": "1"}, "help"))
    assert "cache-reuse" not in {k.name for k in older.default_knobs(Workload(multiturn=True), 2)}  # no such flag
