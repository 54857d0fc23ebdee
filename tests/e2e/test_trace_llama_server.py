"""A shipped trace excerpt replayed against a real llama-server with the demo model: the requests
go out at the trace's (sped-up) arrival times, with its (scaled) output lengths.

24 requests of the Azure conv excerpt (the first 24 span 13.5 s of trace time) at speed 0.5,
so the replay spans ~27 s: an open loop, so each send must land on its due time however the
server keeps up. Tolerance: every request within 250 ms of its trace offset (a loaded 2-core
box delays the event loop by tens of ms; a client that waited for answers would be seconds
late), and the median within 50 ms. Lengths are scaled by 0.02 (prompts of ~1-80 tokens,
answers of 1-8) and clipped to 128 tokens so the CPU can serve them; on a busy 2-core box
(a first run here: 14 of 24 timed out at 0.05 scale) the server may still fall behind, so only
the send times are held to the trace, and the answers that completed to its output lengths.

Then each shipped trace end to end without --trace-max-tokens (issue 30): its first 12 requests
sized as `kvtune run` sizes them (bench/trace_sizing.py: the p99 of prompt + output, the chat
template's allowance on top, bounded by the demo model's context), a server started with that
per-slot context, the trace replayed at its own times: every request is answered (none too long
for its slot), with the trace's output length, and the server's own prompt count stays within
the clip plus the template allowance. Lengths are scaled (the CPU prefills some 100 tokens/s);
the clip is the sizing's, not a flag.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from kvtune.bench.client import BenchOptions, run
from kvtune.bench.trace_sizing import sized_workload
from kvtune.bench.traces import fitted_trace
from kvtune.errors import KvtuneError
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher, gguf_shape, slot_context_choices
from kvtune.launchers.models import demo_model_path
from kvtune.launchers.process import ServerProcess, free_port
from kvtune.workload import Workload

pytestmark = pytest.mark.e2e
TOLERANCE_S = 0.250
MEDIAN_TOLERANCE_S = 0.050
WL = Workload(
    trace="azure-conv",
    trace_requests=24,
    trace_speed=0.5,
    trace_length_scale=0.02,
    trace_max_tokens=128,
    warmup_requests=1,
    concurrency=1,
    request_timeout_s=60,
)


def test_trace_replay_sends_at_the_traces_times(tmp_path, llama_server: str) -> None:
    try:
        model = demo_model_path()
    except KvtuneError as e:
        pytest.skip(str(e))
    launcher = LlamaServerLauncher(binary=llama_server, model_path=str(model))
    port = free_port()
    cand = Candidate(flags={"parallel": 8, "ctx-per-slot": 512, "threads": 2})
    proc = ServerProcess(
        argv=launcher.command(cand, port), env=launcher.environment(cand), log_path=tmp_path / "server.log", port=port
    )
    proc.start()
    try:
        proc.wait_ready(180)
        options = BenchOptions(
            launcher.served_model_name(), extra_body=dict(launcher.request_extra_body()), tokenizer=str(model)
        )
        result = run(proc.base_url, WL, options)
    finally:
        proc.stop()
    want = fitted_trace(WL)
    assert len(result.samples) == 24 and result.prompt_source == want.describe()
    first = min(s.intended_send_time or 0.0 for s in result.samples)
    lags = [s.send_time - first - off for s, off in zip(result.samples, want.offsets)]
    assert max(abs(x) for x in lags) <= TOLERANCE_S, lags
    assert abs(statistics.median(lags)) <= MEDIAN_TOLERANCE_S, lags
    assert want.offsets[-1] >= 25.0  # the replay really spanned the trace's time
    ok = [s for s in result.samples if s.ok]
    assert ok, [s.error for s in result.samples]  # the server answered
    assert all(s.output_tokens == r.output_tokens for s, r in zip(result.samples, want.requests) if s.ok)


# Lengths scaled so 12 requests take a minute or two of a 2-core CPU (Mooncake's first 12 hold
# 219k tokens in full, Azure code's 32k, Azure conversation's 6k).
SHIPPED_SCALES = {"azure-conv": 0.25, "azure-code": 0.1, "mooncake-conv": 0.04}


@pytest.mark.parametrize("name", sorted(SHIPPED_SCALES))
def test_each_shipped_trace_fits_and_replays_without_a_clip_flag(tmp_path, llama_server: str, name: str) -> None:
    try:
        model = demo_model_path()
    except KvtuneError as e:
        pytest.skip(str(e))
    launcher = LlamaServerLauncher(binary=llama_server, model_path=str(model), shape=gguf_shape(model))
    asked = Workload(
        trace=name, trace_requests=12, trace_length_scale=SHIPPED_SCALES[name], warmup_requests=1, request_timeout_s=300
    )
    w, sizing = sized_workload(asked, launcher.model_context())
    assert sizing is not None and asked.trace_max_tokens is None
    per_slot = slot_context_choices(w, launcher.model_context())[0]
    assert per_slot >= sizing.context_tokens
    port = free_port()
    cand = Candidate(flags={"parallel": 4, "ctx-per-slot": per_slot, "threads": 2})
    proc = ServerProcess(
        argv=launcher.command(cand, port), env=launcher.environment(cand), log_path=tmp_path / "server.log", port=port
    )
    proc.start()
    try:
        proc.wait_ready(180)
        options = BenchOptions(
            launcher.served_model_name(), extra_body=dict(launcher.request_extra_body()), tokenizer=str(model)
        )
        result = run(proc.base_url, w, options)
    finally:
        proc.stop()
    want = sizing.replayed.requests
    assert len(result.samples) == 12
    assert all(s.ok for s in result.samples), [s.error for s in result.samples]  # none overflowed its slot
    assert [s.output_tokens for s in result.samples] == [r.output_tokens for r in want]
    for s, r in zip(result.samples, want):  # the template allowance bounds what the server counted
        assert r.input_tokens < s.prompt_tokens <= r.input_tokens + w.template_tokens <= per_slot, (s, r)


def test_capacity_on_a_trace_prints_the_speed_factor_it_holds(tmp_path, llama_server: str) -> None:
    """`kvtune run --workload trace:azure-conv --objective capacity` (issue 30 item 2): every trial
    replays the trace's first 6 requests faster and faster (tuner/trial/capacity.py); the
    summary and `kvtune show` say the speed held as a multiple of the recorded rate, and
    results.json records it with each replay's speed."""
    import json
    import re
    import sys
    from subprocess import run as run_process

    def kvtune(*args: str) -> Any:
        argv = [sys.executable, "-m", "kvtune.cli", *args]
        return run_process(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)

    r = kvtune(
        "run", "--workload", "trace:azure-conv", "--objective", "capacity", "--target", "ttft_p95<5s",
        "--trials", "2", "--set", "workload.trace_requests=6", "--set", "workload.trace_length_scale=0.1", "--set", "workload.warmup_requests=1",
        "--set", "confirm_top=0", "--study", "tcap", "--runs-dir", str(tmp_path), "--progress", "plain",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    said = re.search(r"capacity on the trace: trial (\d+) holds this trace at ([0-9.]+)x its recorded rate", r.stdout)
    assert said, r.stdout[-3000:]
    results = json.loads((tmp_path / "tcap" / "results.json").read_text())
    best = next(t for t in results["trials"] if t["number"] == int(said[1]))
    speed = best["metrics"]["capacity_trace_speed"]
    assert speed == best["metrics"]["capacity"] == float(said[2]) > 0
    levels = best["load_levels"]
    assert levels[0]["load"] == 1.0 and all(lv["unit"] == "x recorded rate" for lv in levels)
    assert levels[-1] == {**levels[-1], "load": speed, "recheck": True, "status": "held"}  # re-checked
    shown = kvtune("show", "tcap", "--runs-dir", str(tmp_path))
    assert shown.returncode == 0 and f"holds this trace at {speed:g}x its recorded rate" in shown.stdout, shown.stdout


def test_a_trace_study_with_no_trace_flag_is_sized_to_this_host_and_names_a_feasible_best(
    tmp_path, llama_server: str
) -> None:
    """`kvtune run --workload trace:mooncake-conv` with no trace flag (issue 30, done-when 1): the
    trace is clipped to the demo model's context (the header says the share), the defaults are
    probed once, and the replay's lengths are scaled when it asks more than a quarter of the
    request timeout here (tuner/trace_fit.py), so the study ends with a feasible best on any host.
    What is held is the rule, not this host's speed: the scale results.json records is the one the
    fit chose, and its estimated demand fits the budget. Two trials, no confirmation: the sizing is
    what is tested, not the search."""
    import json
    import re
    import sys
    from subprocess import run as run_process

    argv = [sys.executable, "-m", "kvtune.cli", "run", "--workload", "trace:mooncake-conv", "--trials", "2"]
    argv += ["--set", "confirm_top=0", "--study", "fit", "--runs-dir", str(tmp_path), "--progress", "plain"]
    r = run_process(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"^trace .* of 32 \(\d+%\) clipped", r.stdout, re.M), r.stdout[:3000]
    host = re.search(r"^host +the server's defaults prefilled [0-9,]+ tokens/s .*$", r.stdout, re.M)
    assert host, r.stdout[:3000]
    fit = json.loads((tmp_path / "fit" / "host-speed" / "fit.json").read_text())
    assert fit["fitted_s"] <= fit["budget_s"] == 30.0
    results = json.loads((tmp_path / "fit" / "results.json").read_text())
    assert results["spec"]["workload"]["trace_length_scale"] == fit["scale"]
    if fit["scale"] < 1:
        assert f"lengths scaled by {fit['scale']:g}" in host[0]
    assert "Best feasible config" in r.stdout
    assert all(t["metrics"].get("error_rate") == 0 for t in results["trials"] if t.get("feasible"))
