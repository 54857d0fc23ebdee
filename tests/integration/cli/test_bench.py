"""`kvtune bench` against the fake server: the table, the vLLM-style JSON, and the API key
never printed or saved."""

import json
import os
import subprocess
import sys

import pytest

from kvtune.testing.fake_server import FakeOpenAIServer


def test_bench_prints_metrics_and_saves_vllm_keys_without_the_key(tmp_path):
    with FakeOpenAIServer(ttft_s=0.05, itl_s=0.005) as server:
        out = tmp_path / "r.json"
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "kvtune.cli",
                "bench",
                server.base_url,
                "--concurrency",
                "4",
                "--num-requests",
                "8",
                "--output-tokens",
                "8",
                "--target",
                "ttft<1s",
                "--save",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "sk-do-not-leak-42", "COLUMNS": "200"},
        )
        assert r.returncode == 0, r.stderr
        assert "Mean TTFT (ms)" in r.stdout and "Request goodput" in r.stdout
        assert "sk-do-not-leak-42" not in r.stdout + r.stderr + out.read_text()
        data = json.loads(out.read_text())
        for key in (
            "completed",
            "request_throughput",
            "output_throughput",
            "request_goodput",
            "mean_ttft_ms",
            "p99_tpot_ms",
            "median_itl_ms",
        ):
            assert key in data
        assert data["completed"] == 8
        # the server saw the key on every request (8 measured + 8 warm-up): sent, never written
        assert server.authorizations == ["Bearer sk-do-not-leak-42"] * 16
        assert all(b.get("stream") for b in server.received)


def test_bench_bad_url_is_a_one_line_error(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "kvtune.cli", "bench", "127.0.0.1:1"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "http://" in r.stderr


def _bench(url, *args):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtune.cli",
            "bench",
            url,
            "--concurrency",
            "2",
            "--num-requests",
            "4",
            "--set",
            "workload.warmup_requests=1",
            "--output-tokens",
            "4",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_bench_checks_targets_and_exits_1_when_one_is_missed():
    with FakeOpenAIServer(ttft_s=0.05, itl_s=0.005) as server:
        held = _bench(server.base_url, "--target", "ttft<5s", "--target", "error_rate<1%")
        missed = _bench(server.base_url, "--target", "ttft<1ms")
    assert held.returncode == 0, held.stdout + held.stderr
    assert "target ttft_p95<5000ms: met" in held.stdout and "target error_rate<1%: met" in held.stdout
    assert missed.returncode == 1, missed.stdout + missed.stderr
    assert "target ttft_p95<1ms: missed" in missed.stdout
    assert "targets missed: ttft_p95<1ms" in missed.stdout


def test_bench_slo_reports_attainment_as_a_trial_does_and_checks_a_target_on_it():
    with FakeOpenAIServer(ttft_s=0.05, itl_s=0.005) as server:
        held = _bench(server.base_url, "--slo", "ttft<2s,tpot<100ms", "--target", "slo_attainment>99%")
        missed = _bench(server.base_url, "--slo", "ttft<1ms", "--target", "slo_attainment>99%")
    assert held.returncode == 0, held.stdout + held.stderr
    assert "per-request SLOs: TTFT < 2 s, TPOT < 100 ms" in held.stdout
    rows = dict(
        c for c in ([x.strip() for x in line.split("│")[1:-1]] for line in held.stdout.splitlines()) if len(c) == 2
    )
    assert rows["SLO attainment (%)"] == "100"  # every request of the fake met both limits
    assert "target slo_attainment>99%: met (100.0%)" in held.stdout
    assert missed.returncode == 1, missed.stdout + missed.stderr
    assert "target slo_attainment>99%: missed (0.0%)" in missed.stdout


def test_bench_refuses_a_relative_target_in_one_line():
    r = _bench("http://127.0.0.1:1", "--target", "ttft<0.8x")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "relative" in r.stderr


def test_bench_replays_multi_turn_conversations_with_the_prompt_cache_on(tmp_path):
    out = tmp_path / "r.json"
    with FakeOpenAIServer(ttft_s=0.02, itl_s=0.002, prefix_cache=True) as server:
        r = _bench(
            server.base_url,
            "--workload",
            "multiturn",
            "--set",
            "workload.turns=3",
            "--set",
            "workload.think_time_s=0.01",
            "--save",
            str(out),
        )
    assert r.returncode == 0, r.stdout + r.stderr
    header = next(line for line in r.stdout.splitlines() if line.startswith("benchmarking "))
    assert "2 concurrent users replaying 2 conversations of 3 turns, 0.01 s think time" in header
    assert "prompt cache: on (cache_prompt=true sent, as kvtune run measures)" in r.stdout
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in r.stdout.splitlines()]
    rows = dict(c for c in cells if len(c) == 2)
    assert rows["Conversations"] == "2" and rows["Mean turns per conversation"] == "3"
    assert "Median TTFT turn 1 (ms)" in rows and "Median TTFT later turns (ms)" in rows
    measured = server.received[1:]  # after the one warm-up turn
    assert sorted(len(b["messages"]) for b in measured) == [1, 1, 3, 3, 5, 5]  # each turn carries the history
    assert all(b["cache_prompt"] is True for b in server.received)
    metrics = json.loads(out.read_text())["kvtune"]["metrics"]
    assert metrics["conversations"] == 2 and metrics["mean_turns_per_conversation"] == 3
    assert metrics["median_ttft_ms_turn1"] > 0 and metrics["median_ttft_ms_later"] > 0


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--set", "workload.turns=3"], "workload.turns applies to --workload multiturn only"),
        (["--set", "workload.think_time_s=2s"], "workload.think_time_s applies to --workload multiturn only"),
        (["--workload", "multiturn", "--set", "workload.turns=0"], "workload.turns must be at least 1, got 0"),
        (
            ["--workload", "multiturn", "--set", "workload.think_time_s=soon"],
            "workload.think_time_s 'soon' is not a duration",
        ),
        (
            ["--workload", "multiturn", "--set", "workload.think_spread=0.5"],
            "draws think times around think_time_s, which is 0",
        ),
        (["--workload", "chat"], "--workload takes multiturn or trace:FILE"),
    ],
)
def test_bench_bad_multiturn_input_is_one_line_exit_2(args, fragment):
    r = _bench("http://127.0.0.1:1", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in r.stderr
