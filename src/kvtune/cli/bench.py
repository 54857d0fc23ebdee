"""`kvtune bench`: measure a running server the way a trial does (vLLM bench serve style).

With `--target`, the run is also a check: each target is shown met or missed and a miss exits
with status 1, so a deployment script (`kvtune export --format bench`) can confirm on the
production box what the study measured."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from kvtune.cli.app import app, console
from kvtune.errors import SpecError
from kvtune.objectives.targets import Target


@app.command()
def bench(
    url: str = typer.Argument(..., help="Base URL of a running OpenAI-compatible server, e.g. http://127.0.0.1:8000"),
    concurrency: int = typer.Option(8, help="Concurrent users (closed loop)."),
    rate: Optional[float] = typer.Option(
        None, help="Requests per second (open loop, arrivals precomputed from --seed)."
    ),
    arrival: str = typer.Option("poisson", help="Open-loop arrivals: poisson, gamma or constant."),
    burstiness: float = typer.Option(1.0, help="Gamma shape for --arrival gamma (1 = Poisson, <1 burstier)."),
    duration: Optional[float] = typer.Option(None, help="Send for this many seconds instead of --num-requests."),
    prompt_tokens: int = typer.Option(200, help="Prompt length in tokens (exact with --tokenizer)."),
    output_tokens: int = typer.Option(64, help="Output tokens per request (forced with ignore_eos)."),
    num_requests: int = typer.Option(32, help="Measured requests."),
    warmup_requests: int = typer.Option(8, help="Warm-up requests, not measured."),
    dataset: Optional[str] = typer.Option(None, help="ShareGPT JSON or JSONL of prompts."),
    dataset_min_tokens: int = typer.Option(0, help="Keep dataset prompts of at least this many tokens."),
    dataset_max_tokens: Optional[int] = typer.Option(None, help="Keep dataset prompts of at most this many tokens."),
    workload_kind: Optional[str] = typer.Option(
        None,
        "--workload",
        help="multiturn replays conversations, each request carrying the history so far (as kvtune run --workload multiturn: --turns, --think-time; with --dataset, ShareGPT's turns). trace:FILE replays a trace's arrival times and lengths (as kvtune run --workload trace:FILE).",
    ),
    turns: Optional[int] = typer.Option(
        None, "--turns", help="--workload multiturn: turns per conversation (default 4)."
    ),
    think_time: Optional[str] = typer.Option(
        None, "--think-time", help="--workload multiturn: a user's pause between turns, e.g. 2s (default 0)."
    ),
    conversation_max_tokens: Optional[int] = typer.Option(
        None,
        "--conversation-max-tokens",
        help="--workload multiturn: end a conversation when its next turn would not fit this many tokens of context (default: room for --turns turns of --prompt-tokens and --output-tokens, as kvtune run sizes a slot).",
    ),
    trace_requests: Optional[int] = typer.Option(None, "--trace-requests", help="Replay the trace's first N requests."),
    trace_window: Optional[str] = typer.Option(
        None, "--trace-window", help="Replay the requests of the trace's first S seconds (trace time)."
    ),
    trace_speed: float = typer.Option(1.0, "--trace-speed", help="Time scale: 4 replays the trace 4x faster."),
    trace_length_scale: float = typer.Option(
        1.0, "--trace-length-scale", help="Multiply every input and output length by F."
    ),
    trace_max_tokens: Optional[int] = typer.Option(
        None, "--trace-max-tokens", help="Clip each trace request to this many tokens (prompt + output)."
    ),
    shared_prefix_fraction: float = typer.Option(0.0, help="Fraction of requests sharing one long system prompt."),
    shared_prefix_tokens: int = typer.Option(0, help="Length of the (shared or unique) system prompt."),
    endpoint: str = typer.Option("chat", help="chat (/v1/chat/completions) or completions (/v1/completions)."),
    model: Optional[str] = typer.Option(None, help="Model name to send (default: the first one /v1/models lists)."),
    tokenizer: Optional[str] = typer.Option(
        None, help="GGUF file or HF folder whose tokenizer makes prompt sizes exact."
    ),
    target: list[str] = typer.Option(
        [],
        "--target",
        "-t",
        help="Targets to check, e.g. 'ttft<1s' (exit 1 when one is missed); latency ones also define goodput (requests meeting all of them per second).",
    ),
    api_key: Optional[str] = typer.Option(
        None, "--api-key", help="Bearer token (default $OPENAI_API_KEY); never printed or saved."
    ),
    timeout: float = typer.Option(120.0, help="Seconds one request may take before it counts as failed."),
    seed: int = typer.Option(0, help="Seed for prompts and arrivals."),
    save: Optional[Path] = typer.Option(
        None, help="Write results as JSON (vLLM bench serve's key names plus per-request samples)."
    ),
    prompt_cache: Optional[str] = typer.Option(
        None,
        "--prompt-cache",
        help="llama-server's prompt cache: off (cache_prompt=false), on, or server (send nothing; the server's default). Default: as kvtune run measures: on for a workload that reuses prefixes (--workload multiturn or trace:FILE, --shared-prefix-fraction), off for synthetic prompts.",
    ),
) -> None:
    """Measure a running server (vLLM bench serve style): TTFT, TPOT, ITL, E2EL, throughput, goodput."""
    import datetime
    import json

    from kvtune.bench.client import BenchOptions, detect_model, resolve_api_key, slo_goodput
    from kvtune.bench.client import run as bench_run
    from kvtune.bench.report import metrics_table, server_metrics_table, to_vllm_json
    from kvtune.bench.server_kind import PromptCache, detect_server
    from kvtune.cli.run import _pause, _trace_of
    from kvtune.durations import parse_duration
    from kvtune.objectives.targets import parse_targets
    from kvtune.workload import Workload

    targets = parse_targets(list(target))
    relative = [t.text for t in targets if t.relative]
    if relative:
        raise SpecError(
            f"target {relative[0]!r} is relative to a baseline, which kvtune bench does not "
            f"have: give an absolute threshold, e.g. 'ttft<1s'"
        )
    key = resolve_api_key(api_key)
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise SpecError(f"URL {url!r} must start with http:// or https://")
    multiturn = _multiturn(workload_kind, turns=turns, think_time=think_time, max_tokens=conversation_max_tokens)
    workload = Workload(
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        num_requests=num_requests,
        warmup_requests=warmup_requests,
        request_timeout_s=timeout,
        seed=seed,
        mode="open" if rate is not None else "closed",
        rate=rate,
        arrival=arrival,
        burstiness=burstiness,
        duration_s=duration,
        endpoint=endpoint,
        dataset=dataset,
        dataset_min_tokens=dataset_min_tokens,
        dataset_max_tokens=dataset_max_tokens,
        shared_prefix_fraction=shared_prefix_fraction,
        shared_prefix_tokens=shared_prefix_tokens,
        trace=_trace_of(workload_kind),
        trace_requests=trace_requests,
        trace_window_s=parse_duration(trace_window, what="--trace-window") if trace_window is not None else None,
        trace_speed=trace_speed,
        trace_length_scale=trace_length_scale,
        trace_max_tokens=trace_max_tokens,
        multiturn=multiturn,
        turns=4 if turns is None else turns,
        think_time_s=_pause(think_time, "--think-time") or 0.0,
        conversation_max_tokens=conversation_max_tokens,
    ).validate()
    # as kvtune run measured: workloads that reuse prefixes (a trace, conversations, a shared
    # system prompt) with the prompt cache on, synthetic prompts without
    measured = PromptCache.ON if workload.reuses_prefixes else PromptCache.OFF
    try:
        cache_policy = measured if prompt_cache is None else PromptCache(prompt_cache)
    except ValueError:
        raise SpecError(
            f"--prompt-cache must be one of {', '.join(PromptCache.values())}, got {prompt_cache!r}"
        ) from None
    model_name = model or detect_model(base, api_key=key)
    server = detect_server(base, api_key=key)
    latency = {t.metric: t.threshold for t in targets if t.upper and t.metric in ("ttft", "tpot", "e2el")}
    console.print(f"benchmarking {base} ({model_name}): {workload.describe()}", markup=False)
    console.print(f"server: {server.name}; {server.describe_policy(cache_policy, workload)}", markup=False)
    result = bench_run(
        base,
        workload,
        BenchOptions(
            model_name,
            api_key=key,
            tokenizer=tokenizer,
            extra_body=server.cache_body(cache_policy),
            goodput_fn=slo_goodput(latency) if latency else None,
            scrape_metrics=True,
            on_phase=lambda ph: console.print(f"[dim]... {ph}[/dim]"),
        ),
    )
    table = Table(show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for label, value in [*metrics_table(result.metrics), *server_metrics_table(result.server_metrics)]:
        table.add_row(f"[bold]{label}[/bold]" if value == "" else label, value)
    console.print(table)
    for note in getattr(result, "notes", []) or []:
        console.print(f"note: {note}", markup=False)
    if save:
        payload = to_vllm_json(
            result,
            {
                "date": datetime.datetime.now().isoformat(timespec="seconds"),
                "model_id": model_name,
                "base_url": base,
                "backend": f"openai-{endpoint}",
            },
        )
        save.write_text(json.dumps(payload, allow_nan=False, indent=1))
        console.print(f"saved {save}")
    missed = [t for t in targets if not t.met(result.metrics)]
    for t in targets:
        console.print(
            f"target {t.constraint_key}: {'missed' if t in missed else 'met'} ({_shown(t, result.metrics)})",
            markup=False,
        )
    failed = result.metrics.get("failed", 0)
    if missed or (failed and failed == result.metrics.get("num_requests")):
        if missed:
            console.print(f"targets missed: {', '.join(t.constraint_key for t in missed)}", markup=False)
        raise typer.Exit(1)


def _multiturn(
    kind: Optional[str], *, turns: Optional[int], think_time: Optional[str], max_tokens: Optional[int]
) -> bool:
    """Whether --workload asks for conversations; their flags without it are one line, exit 2."""
    if kind == "multiturn":
        return True
    given = [
        f
        for f, v in (("--turns", turns), ("--think-time", think_time), ("--conversation-max-tokens", max_tokens))
        if v is not None
    ]
    if given:
        raise SpecError(f"{given[0]} applies to --workload multiturn only: add --workload multiturn")
    return False


def _shown(t: Target, metrics: dict) -> str:
    """The measured value of a target's metric, in its unit."""
    v = t.value(metrics)
    if v == float("inf"):
        return "no value: requests failed"
    if t.metric == "error_rate":
        return f"{v * 100:.1f}%"
    return f"{v:.0f} ms" if t.key.endswith("_ms") else f"{v:.1f}"
