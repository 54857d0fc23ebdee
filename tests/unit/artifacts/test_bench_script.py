"""`kvtune export --format bench`: the verification script re-runs the study's workload with its
targets (relative ones fixed from the baseline) and prints the `vllm bench serve` equivalent; run
for real (bash, `kvtune bench`) against the fake server, it exits 0 when the targets hold and 1
when one is missed.

The tests here start no process; those that do are in tests/integration/artifacts/test_bench_script.py."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from kvtune.artifacts import bench_script, export
from kvtune.artifacts import overview as ov
from kvtune.artifacts.deployable import Deployable
from kvtune.errors import SpecError
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
KVTUNE = f"{shlex.quote(sys.executable)} -m kvtune.cli"


def results(**spec) -> dict:
    r = json.loads((DATA / "results_small.json").read_text())
    r["spec"].update(spec)
    return r


def script(r: dict, port: int = 8080) -> str:
    return export.render("bench", ov.pick_trial(r).to_dict(), r, "0.0.0.0", port)


def test_the_script_carries_the_workload_targets_and_the_vllm_line() -> None:
    text = script(results())
    assert text.startswith("#!/usr/bin/env bash\n") and 'URL="${1:-http://127.0.0.1:8080}"' in text
    run = next(line for line in text.splitlines() if line.startswith("exec "))
    args = shlex.split(run)
    for flag, value in (
        ("--concurrency", "2"),
        ("--prompt-tokens", "32"),
        ("--output-tokens", "8"),
        ("--num-requests", "4"),
        ("workload.warmup_requests", "1"),
        ("--seed", "0"),
    ):
        assert given(args)[flag] == value
    assert [args[i + 1] for i, a in enumerate(args) if a == "--target"] == ["ttft_p95<60000ms", "error_rate<1%"]
    vllm = shlex.split(next(line for line in text.splitlines() if line.startswith("printf")))[2]
    assert vllm.startswith("vllm bench serve --backend openai-chat --endpoint /v1/chat/completions")
    assert "--max-concurrency 2" in vllm and "--random-input-len 32" in vllm
    assert "--goodput" not in vllm and "--slo" not in given(args)  # no per-request SLO: a p95 target is none


def test_relative_targets_are_fixed_at_the_baselines_threshold() -> None:
    r = results(targets=["ttft<0.5x"])
    base = r["trials"][0]["metrics"]["p95_ttft_ms"]
    [ttft, _] = bench_script.absolute_targets(Deployable.read(r["trials"][0], r))
    assert ttft.threshold == pytest.approx(0.5 * base) and not ttft.relative
    r["anchor"] = {"quiet": {"metrics": {"p95_ttft_ms": 2 * base}}}  # its own were disturbed (tuner/anchor.py)
    [ttft, _] = bench_script.absolute_targets(Deployable.read(r["trials"][0], r))
    assert ttft.threshold == pytest.approx(base)  # fixed from the quiet figures it was anchored on
    del r["anchor"]
    r["trials"][0]["metrics"] = None
    with pytest.raises(SpecError, match="not measured"):
        bench_script.absolute_targets(Deployable.read(r["trials"][0], r))


def test_open_loop_and_capacity_studies() -> None:
    r = results(
        workload={"mode": "open", "rate": 2.0, "arrival": "gamma", "burstiness": 0.5, "num_requests": 10},
        objective="capacity",
    )
    trial = ov.pick_trial(r).to_dict()
    trial["metrics"]["capacity"] = 3.5
    text = export.render("bench", trial, r)
    assert "--rate 3.5" in text and "--set workload.arrival=gamma --set workload.burstiness=0.5" in text
    assert "--request-rate 3.5 --burstiness 0.5" in text
    trial["metrics"]["capacity"] = 0
    with pytest.raises(SpecError, match="no capacity"):
        export.render("bench", trial, r)


def test_a_capacity_study_on_a_trace_is_checked_at_the_replay_speed_it_held() -> None:
    fit = {"trace": "mooncake-conv", "trace_requests": 3, "trace_length_scale": 0.125}
    r = results(workload={**results()["spec"]["workload"], **fit}, objective="capacity")
    trial = ov.pick_trial(r).to_dict()
    trial["metrics"].update(capacity=2.5, capacity_trace_speed=2.5)
    text = export.render("bench", trial, r)
    args = _bench_argv(text)
    assert given(args)["workload.trace_speed"] == "2.5" and given(args)["--concurrency"] == "2"
    lines = text.splitlines()
    rows = lines[lines.index("cat > \"$VLLM_TRACE\" <<'KVTUNE_TRACE'") + 1 : lines.index("KVTUNE_TRACE")]
    at_1x = script(results(workload={**results()["spec"]["workload"], **fit})).splitlines()
    rows_1x = at_1x[at_1x.index("cat > \"$VLLM_TRACE\" <<'KVTUNE_TRACE'") + 1 : at_1x.index("KVTUNE_TRACE")]
    times, times_1x = ([json.loads(x)["timestamp"] for x in rs] for rs in (rows, rows_1x))
    assert times == pytest.approx([t / 2.5 for t in times_1x], abs=1e-5)  # vLLM replays it 2.5x faster too


def given(args: list[str]) -> dict[str, str]:
    """kvtune bench's arguments as {flag or setting key: value}: `--set KEY=VALUE` by its key."""
    out = {}
    for flag, value in zip(args, args[1:]):
        if flag == "--set":
            key, _, v = value.partition("=")
            out[key] = v
        elif flag.startswith("--"):
            out[flag] = value
    return out


def _bench_argv(text: str) -> list[str]:
    return shlex.split(next(line for line in text.splitlines() if line.startswith("exec ")))


def test_the_datasets_length_filter_goes_to_kvtune_bench() -> None:
    w = {"dataset": "/data/sg.json", "dataset_min_tokens": 50, "dataset_max_tokens": 400}
    args = _bench_argv(script(results(workload={**results()["spec"]["workload"], **w})))
    assert given(args)["workload.dataset_min_tokens"] == "50"
    assert given(args)["workload.dataset_max_tokens"] == "400"


def test_the_tokenizer_is_the_model_the_server_loaded_whatever_the_spec_named() -> None:
    r = results()  # the demo model: spec model None, the argv holds the resolved GGUF path
    loaded = r["trials"][0]["argv"][r["trials"][0]["argv"].index("--model") + 1]
    assert f"MODEL_TOKENIZER={shlex.quote(loaded)}" in script(r)
    relative = results(model="models/mine.gguf")
    assert f"MODEL_TOKENIZER={shlex.quote(loaded)}" in script(relative)


def test_a_trace_study_replays_the_same_trace_cached_and_writes_vllms_timed_trace_rows() -> None:
    fit = {"trace": "mooncake-conv", "trace_requests": 3, "trace_speed": 8.0, "trace_length_scale": 0.125}
    text = script(results(workload={**results()["spec"]["workload"], **fit}))
    args = _bench_argv(text)
    for name, value in (
        ("--workload", "trace:mooncake-conv"),
        ("workload.trace_requests", "3"),
        ("workload.trace_speed", "8.0"),
        ("workload.trace_length_scale", "0.125"),
        ("--prompt-cache", "on"),  # as the tuner measured the trace: its prefixes reused
    ):
        assert given(args)[name] == value
    assert (
        "workload.trace_window_s" not in given(args)
        and "workload.trace_max_tokens" not in given(args)
        and "--rate" not in given(args)
    )
    windowed = {**fit, "trace_window_s": 30.0, "trace_max_tokens": 600}
    args = _bench_argv(script(results(workload={**results()["spec"]["workload"], **windowed})))
    assert given(args)["workload.trace_window_s"] == "30.0" and given(args)["workload.trace_max_tokens"] == "600"
    lines = text.splitlines()
    rows = lines[lines.index("cat > \"$VLLM_TRACE\" <<'KVTUNE_TRACE'") + 1 : lines.index("KVTUNE_TRACE")]
    assert [json.loads(r)["input_length"] for r in rows] == [845, 915, 904]  # 6758, 7322, 7236 x 0.125
    assert any(line.startswith("echo '  note: vllm bench serve replays a trace") for line in lines)


def test_a_multiturn_study_replays_its_conversations_with_the_prompt_cache_on() -> None:
    talk = {"multiturn": True, "turns": 3, "think_time_s": 1.5, "conversation_max_tokens": 3000}
    text = script(results(workload={**results()["spec"]["workload"], **talk}))
    args = _bench_argv(text)
    for name, value in (
        ("--workload", "multiturn"),
        ("workload.turns", "3"),
        ("workload.think_time_s", "1.5"),
        ("workload.conversation_max_tokens", "3000"),
        ("--prompt-cache", "on"),  # as the tuner measured conversations
        ("--concurrency", "2"),
        ("--endpoint", "chat"),
    ):
        assert given(args)[name] == value
    # no vllm bench serve line (it would read as the same load), only the note saying why
    assert not any(line.startswith("printf") for line in text.splitlines())
    note = next(line for line in text.splitlines() if line.startswith("echo '  note: "))
    assert "no vllm bench serve line" in note and "benchmarks/multi_turn" in note
    plain = {"multiturn": True, "turns": 2}
    args = _bench_argv(script(results(workload={**results()["spec"]["workload"], **plain})))
    assert given(args)["workload.turns"] == "2" and given(args)["--prompt-cache"] == "on"
    assert "workload.think_time_s" not in given(args) and "workload.conversation_max_tokens" not in given(
        args
    )  # kvtune bench's defaults


def test_single_turn_studies_send_no_conversation_flags() -> None:
    args = _bench_argv(script(results()))
    assert (
        "--workload" not in given(args) and "workload.turns" not in given(args) and "--prompt-cache" not in given(args)
    )


def _targets(args: list[str]) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == "--target"]


def test_a_study_with_an_slo_passes_it_to_kvtune_bench_and_builds_vllms_goodput_from_it() -> None:
    text = script(results(slo="ttft<2s,tpot<100ms", targets=["ttft_p95<60s", "slo_attainment>99%"]))
    args = _bench_argv(text)
    assert given(args)["--slo"] == "ttft<2s,tpot<100ms" and args.count("--slo") == 1
    assert _targets(args) == ["ttft_p95<60000ms", "slo_attainment>99%", "error_rate<1%"]
    vllm = shlex.split(shlex.split(next(line for line in text.splitlines() if line.startswith("printf")))[2])
    assert vllm[vllm.index("--goodput") + 1 :] == ["ttft:2000", "tpot:100"]  # from the SLO, not the targets
    assert "# per-request SLOs: ttft<2s,tpot<100ms" in text.splitlines()


def test_an_slo_without_an_attainment_target_is_measured_not_checked() -> None:
    args = _bench_argv(script(results(slo="e2el<5s")))
    assert given(args)["--slo"] == "e2el<5s" and _targets(args) == ["ttft_p95<60000ms", "error_rate<1%"]


def test_a_trace_study_without_an_slo_checks_only_its_own_targets() -> None:
    fit = {"trace": "mooncake-conv", "trace_requests": 3, "trace_max_tokens": 600}
    text = script(results(workload={**results()["spec"]["workload"], **fit}, targets=[]))
    args = _bench_argv(text)
    assert _targets(args) == ["error_rate<1%"]  # the one target the study added, nothing about SLOs
    assert "--slo" not in given(args) and "slo_attainment" not in text
    assert given(args)["workload.trace_max_tokens"] == "600"  # the clip the study measured with
    vllm = next(line for line in text.splitlines() if line.startswith("printf"))
    assert "timed_trace" in vllm and "--goodput" not in vllm
    assert "# per-request SLOs: none (the study had no --slo)" in text.splitlines()


def test_the_script_runs_the_kvtune_that_wrote_it_unless_kvtune_is_set() -> None:
    # issue 41: `exec: kvtune: not found` (127) from any shell without kvtune's venv on PATH
    text = script(results())
    assert bench_script.writer_kvtune() == [sys.executable, "-m", "kvtune.cli"]
    assert f"WROTE_IT=({shlex.quote(sys.executable)} -m kvtune.cli)" in text
    assert 'if [ -n "${KVTUNE:-}" ]; then' in text and "exit 127" in text
    assert "${KVTUNE:-kvtune}" not in text
    other = bench_script.render(
        Deployable.read(ov.pick_trial(results()), results()), "127.0.0.1", 8080, [], kvtune=["/opt/it's/kvtune"]
    )
    assert "WROTE_IT=('/opt/it'\"'\"'s/kvtune')" in other
    assert "# KVTUNE names the kvtune command (default: '/opt/it'\"'\"'s/kvtune', the kvtune that wrote" in other
