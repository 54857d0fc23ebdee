"""vLLM's --speculative-config: off unless the study asks; n-gram (prompt lookup) shapes with
no second model, draft lengths with one; always an "off" choice, so the search can find that
speculation does not pay on the workload; on the CPU build too (vLLM 0.32 runs it there)."""

from __future__ import annotations

import json

from kvtune.knobs import Candidate
from kvtune.launchers.vllm import CPU, GiB, VllmBuild, VllmLauncher
from kvtune.launchers.vllm.speculative import SPECULATIVE_CONFIG, speculative_knobs
from kvtune.workload import Workload


def test_no_knob_unless_asked() -> None:
    assert speculative_knobs(None, speculative=False) == []


def test_ngram_shapes_without_a_draft_model_and_draft_lengths_with_one() -> None:
    [ngram] = speculative_knobs(None, speculative=True)
    assert ngram.name == SPECULATIVE_CONFIG and ngram.choices[0] is None
    shapes = [json.loads(c) for c in ngram.choices[1:]]
    assert all(s["method"] == "ngram" and s["num_speculative_tokens"] >= 2 and s["prompt_lookup_max"] for s in shapes)
    assert len({json.dumps(s, sort_keys=True) for s in shapes}) == len(shapes) >= 3
    [draft] = speculative_knobs("/models/small", speculative=False)
    configs = [json.loads(c) for c in draft.choices[1:]]
    assert draft.choices[0] is None and {c["model"] for c in configs} == {"/models/small"}
    assert sorted(c["num_speculative_tokens"] for c in configs) == [2, 4, 8]
    [both] = speculative_knobs("/models/small", speculative=True)
    assert {json.loads(c).get("method", "draft") for c in both.choices[1:]} == {"ngram", "draft"}


def test_the_cpu_launcher_offers_it_and_renders_the_json_as_one_argument() -> None:
    build = VllmBuild(CPU, "vllm 0.32.0", python="/venv/bin/python")
    lau = VllmLauncher(model="/models/smol", build=build, memory_bytes=16 * GiB, speculative=True)
    knob = next(k for k in lau.default_knobs(Workload(), 2) if k.name == SPECULATIVE_CONFIG)
    argv = lau.command(Candidate(flags={SPECULATIVE_CONFIG: knob.choices[1]}), 8000)
    assert json.loads(argv[argv.index("--speculative-config") + 1])["method"] == "ngram"
    plain = VllmLauncher(model="/models/smol", build=build, memory_bytes=16 * GiB)
    assert SPECULATIVE_CONFIG not in {k.name for k in plain.default_knobs(Workload(), 2)}
