"""The printed `vllm bench serve` line expresses the study's load, or says plainly what it cannot:
one test per defect issue 20 item 6 named (the model name, --sharegpt-output-len, the shared
prefix's fraction, constant arrivals), and a trace replayed through vLLM's timed_trace dataset.
Every flag used here is one vLLM 0.32's `vllm bench serve` parser accepts (checked against its
source: benchmarks/serve.py, benchmarks/datasets/datasets.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kvtune.artifacts.vllm_bench import (
    DEMO_HF_ID,
    UNKNOWN_HF_ID,
    ServedModel,
    nearest_repeats,
    served_model,
    timed_trace_rows,
    vllm_line,
)
from kvtune.bench.traces import fitted_trace
from kvtune.objectives.slo import parse_slo
from kvtune.study.spec import StudySpec
from kvtune.workload import Workload

DEMO = ServedModel(
    name="SmolLM2-135M-Instruct.Q4_1", path="/cache/SmolLM2-135M-Instruct.Q4_1.gguf", tokenizer=DEMO_HF_ID
)
SLO = parse_slo("ttft<2s,tpot<100ms")


def flag(argv: list[str], name: str) -> str:
    assert argv.count(name) == 1, f"{name} appears {argv.count(name)} times in {argv}"
    return argv[argv.index(name) + 1]


def spec(backend: str, model: str | None) -> StudySpec:
    return StudySpec.from_dict({"study": "s", "backend": backend, "model": model, "targets": ["ttft<2s"]})


def test_a_vllm_study_names_the_folder_its_server_served_not_demo() -> None:
    folder = "/root/.cache/kvtune/hf/SmolLM2-135M-Instruct"
    trial = {"argv": ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", folder, "--port", "1"]}
    model = served_model(trial["argv"], spec("vllm", None))
    assert model == ServedModel(name=folder, path=folder, tokenizer=folder)
    argv = vllm_line(Workload(), SLO, model).argv
    assert flag(argv, "--model") == folder and "--tokenizer" not in argv
    named = {"argv": ["/venv/bin/vllm", "serve", folder, "--served-model-name", "smol", "--port", "1"]}
    argv = vllm_line(Workload(), SLO, served_model(named["argv"], spec("vllm", "demo"))).argv
    assert flag(argv, "--model") == "smol" and flag(argv, "--tokenizer") == folder


def test_a_llama_server_study_sends_the_gguf_stem_and_tokenizes_with_an_hf_id() -> None:
    gguf = "/cache/SmolLM2-135M-Instruct.Q4_1.gguf"
    trial = {"argv": ["/bin/llama-server", "--model", gguf, "--port", "1"]}
    assert served_model(trial["argv"], spec("llama-server", None)) == DEMO
    own = served_model(trial["argv"], spec("llama-server", "models/mine.gguf"))
    assert own.path == gguf and own.tokenizer == UNKNOWN_HF_ID  # vLLM cannot tokenize with a GGUF


def test_sharegpt_forces_the_output_length_and_names_the_filter_it_cannot_apply() -> None:
    w = Workload(dataset="/data/sg.json", output_tokens=48)
    line = vllm_line(w, SLO, DEMO)
    assert flag(line.argv, "--dataset-name") == "sharegpt" and flag(line.argv, "--sharegpt-output-len") == "48"
    assert line.notes == []
    filtered = vllm_line(replace(w, dataset_min_tokens=50, dataset_max_tokens=400), SLO, DEMO)
    assert any("dataset_min_tokens=50, dataset_max_tokens=400" in n for n in filtered.notes)


def test_a_shared_prefix_goes_to_the_workloads_fraction_of_requests() -> None:
    every = vllm_line(Workload(shared_prefix_fraction=1.0, shared_prefix_tokens=300), SLO, DEMO)
    assert flag(every.argv, "--random-prefix-len") == "300" and every.notes == []
    half = vllm_line(Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=300, num_requests=32), SLO, DEMO)
    assert flag(half.argv, "--dataset-name") == "prefix_repetition" and "--random-prefix-len" not in half.argv
    assert flag(half.argv, "--prefix-repetition-num-prefixes") == "16"  # 16 prefixes, each used twice
    assert flag(half.argv, "--prefix-repetition-prefix-len") == "300"
    assert flag(half.argv, "--prefix-repetition-suffix-len") == "200" and flag(half.argv, "--num-prompts") == "32"
    assert any("50% of 32 requests reuse one" in n for n in half.notes)


@pytest.mark.parametrize(
    ("fraction", "requests", "repeats"), [(0.5, 32, 2), (0.9, 32, 10), (0.75, 32, 4), (0.1, 32, 1), (0.99, 4, 4)]
)
def test_the_repeats_per_prefix_give_the_nearest_share_of_reusing_requests(fraction, requests, repeats) -> None:
    assert nearest_repeats(fraction, requests) == repeats


@pytest.mark.parametrize(
    ("arrival", "burstiness", "shown"), [("constant", 1.0, "inf"), ("poisson", 1.0, "1.0"), ("gamma", 0.5, "0.5")]
)
def test_arrivals_keep_their_shape(arrival: str, burstiness: float, shown: str) -> None:
    w = Workload(mode="open", rate=3.0, arrival=arrival, burstiness=burstiness)
    argv = vllm_line(w, SLO, DEMO).argv
    assert flag(argv, "--request-rate") == "3.0" and flag(argv, "--burstiness") == shown
    assert "--max-concurrency" not in argv


def test_a_timed_open_loop_sends_rate_times_duration_requests_and_says_so() -> None:
    line = vllm_line(Workload(mode="open", rate=2.0, duration_s=30.0), SLO, DEMO)
    assert flag(line.argv, "--num-prompts") == "60" and any("rate x duration" in n for n in line.notes)


def test_a_trace_replays_through_timed_trace_with_its_fitted_times_lengths_and_blocks() -> None:
    w = Workload(trace="mooncake-conv", trace_requests=5, trace_speed=4.0, trace_length_scale=0.125, endpoint="chat")
    line = vllm_line(w, SLO, DEMO)
    fitted = fitted_trace(w)
    assert flag(line.argv, "--dataset-name") == "timed_trace" and flag(line.argv, "--num-prompts") == "5"
    assert flag(line.argv, "--timed-trace-chunk-hash-size") == str(fitted.block_tokens) == "64"
    assert flag(line.argv, "--backend") == "openai" and flag(line.argv, "--endpoint") == "/v1/completions"
    assert "--request-rate" not in line.argv and "--max-concurrency" not in line.argv  # the trace's own times
    assert any("/v1/completions only" in n for n in line.notes)
    rows = [json.loads(r) for r in line.trace_rows]
    assert [r["timestamp"] for r in rows] == pytest.approx(fitted.offsets)
    assert [(r["input_length"], r["output_length"]) for r in rows] == [
        (q.input_tokens, q.output_tokens) for q in fitted.requests
    ]
    for row, req in zip(rows, fitted.requests):
        assert len(row["hash_ids"]) * 64 >= row["input_length"] > (len(row["hash_ids"]) - 1) * 64
        assert row["hash_ids"][: len(req.hash_ids)] == list(req.hash_ids)[: len(row["hash_ids"])]
    assert rows[0]["hash_ids"][0] == rows[1]["hash_ids"][0]  # the trace's shared first block stays shared


def test_a_trace_without_hash_ids_gets_fresh_blocks_so_nothing_is_shared() -> None:
    fitted = fitted_trace(Workload(trace="azure-conv", trace_requests=20))
    ids = [i for row in timed_trace_rows(fitted) for i in json.loads(row)["hash_ids"]]
    assert ids and len(ids) == len(set(ids))


def test_a_trace_not_on_this_box_gives_no_vllm_line_but_says_why(tmp_path) -> None:
    line = vllm_line(Workload(trace=str(tmp_path / "gone.jsonl")), SLO, DEMO)
    assert line.argv == [] and len(line.notes) == 1 and "unreadable here" in line.notes[0]


def test_conversations_give_no_vllm_line_only_a_note_naming_the_multi_turn_benchmark() -> None:
    for w in (Workload(multiturn=True, turns=3, think_time_s=2.0), Workload(multiturn=True, dataset="/data/sg.json")):
        line = vllm_line(w, SLO, DEMO)
        assert line.argv == [] and line.trace_rows == [] and len(line.notes) == 1
        assert line.notes[0].startswith("no vllm bench serve line:") and "multi-turn conversations" in line.notes[0]
        assert "benchmarks/multi_turn" in line.notes[0]


def test_goodput_is_the_studys_slo_in_vllms_key_value_ms_form_and_absent_without_one() -> None:
    argv = vllm_line(Workload(), parse_slo("ttft<2s,tpot<=100ms,e2el<1.5s"), DEMO).argv
    pairs = argv[argv.index("--goodput") + 1 :]
    assert pairs == ["ttft:2000", "tpot:100", "e2el:1500"]
    for pair in pairs:  # as vLLM's parse_goodput reads them: one KEY:VALUE argument each, ms
        name, value = pair.split(":")
        assert name in ("ttft", "tpot", "e2el") and float(value) > 0
    assert vllm_line(Workload(), parse_slo("ttft<800ms"), DEMO).argv[-2:] == ["--goodput", "ttft:800"]
    assert "--goodput" not in vllm_line(Workload(), None, DEMO).argv  # a percentile target is no SLO
