"""The flags of `kvtune bench`, declared once as a typed, immutable record (cli/flag_record.py):
what was typed, unchecked; cli/bench.py turns it into a checked `Workload` and runs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kvtune.cli.flag_record import arg, opt


@dataclass(frozen=True)
class BenchFlags:
    """What `kvtune bench` was given, flag by flag (None: not given)."""

    url: str = arg(..., help="Base URL of a running OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    concurrency: int = opt(8, help="Concurrent users (closed loop).")
    rate: Optional[str] = opt(
        None,
        help="Requests per second (open loop, arrivals precomputed from --seed); a list such as 1,2,4,8 sweeps the rates, one run each, and prints the goodput curve. With --workload multiturn: conversations starting per second (--concurrency then sizes only the warm-up).",
    )
    arrival: str = opt("poisson", help="Open-loop arrivals: poisson, gamma or constant.")
    burstiness: float = opt(1.0, help="Gamma shape for --arrival gamma (1 = Poisson, <1 burstier).")
    duration: Optional[float] = opt(None, help="Send for this many seconds instead of --num-requests.")
    prompt_tokens: int = opt(200, help="Prompt length in tokens (exact with --tokenizer).")
    output_tokens: int = opt(64, help="Output tokens per request (forced with ignore_eos).")
    prompt_spread: float = opt(
        0.0,
        help="Draw each prompt's length from a lognormal of mean --prompt-tokens and this sigma of log, e.g. 0.5 (0: constant); seeded by --seed, clamped to [1, its p99].",
    )
    output_spread: float = opt(
        0.0, help="The same for output lengths: lognormal of mean --output-tokens and this sigma (0: constant)."
    )
    num_requests: int = opt(32, help="Measured requests.")
    warmup_requests: int = opt(8, help="Warm-up requests, not measured.")
    dataset: Optional[str] = opt(None, help="ShareGPT JSON or JSONL of prompts.")
    dataset_min_tokens: int = opt(0, help="Keep dataset prompts of at least this many tokens.")
    dataset_max_tokens: Optional[int] = opt(None, help="Keep dataset prompts of at most this many tokens.")
    workload_kind: Optional[str] = opt(
        None,
        "--workload",
        help="multiturn replays conversations, each request carrying the history so far (as kvtune run --workload multiturn: --turns, --think-time; with --dataset, ShareGPT's turns). trace:FILE replays a trace's arrival times and lengths (as kvtune run --workload trace:FILE).",
    )
    turns: Optional[int] = opt(None, "--turns", help="--workload multiturn: turns per conversation (default 4).")
    think_time: Optional[str] = opt(
        None, "--think-time", help="--workload multiturn: a user's pause between turns, e.g. 2s (default 0)."
    )
    think_spread: Optional[float] = opt(
        None,
        "--think-spread",
        help="--workload multiturn: draw each pause from a lognormal of mean --think-time and this sigma of log, e.g. 0.5 (default 0: constant); seeded by --seed, the conversation and the turn, clamped to its p99.",
    )
    conversation_max_tokens: Optional[int] = opt(
        None,
        "--conversation-max-tokens",
        help="--workload multiturn: end a conversation when its next turn would not fit this many tokens of context (default: room for --turns turns of --prompt-tokens and --output-tokens, as kvtune run sizes a slot).",
    )
    trace_requests: Optional[int] = opt(
        None,
        "--trace-requests",
        help="Replay the trace's first N requests (default: --num-requests, unless --trace-window).",
    )
    trace_window: Optional[str] = opt(
        None, "--trace-window", help="Replay the requests of the trace's first S seconds (trace time)."
    )
    trace_speed: float = opt(1.0, "--trace-speed", help="Time scale: 4 replays the trace 4x faster.")
    trace_length_scale: float = opt(1.0, "--trace-length-scale", help="Multiply every input and output length by F.")
    trace_max_tokens: Optional[int] = opt(
        None, "--trace-max-tokens", help="Clip each trace request to this many tokens (prompt + output)."
    )
    trace_time_unit: str = opt(
        "auto",
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
    shared_prefix_fraction: float = opt(0.0, help="Fraction of requests sharing one long system prompt.")
    shared_prefix_tokens: int = opt(0, help="Length of the (shared or unique) system prompt.")
    prefix_groups: int = opt(
        1,
        "--prefix-groups",
        help="Split the requests sharing a system prompt (--shared-prefix-fraction) among N distinct shared prompts, dealt in turn (default 1: one for all).",
    )
    endpoint: str = opt("chat", help="chat (/v1/chat/completions) or completions (/v1/completions).")
    model: Optional[str] = opt(None, help="Model name to send (default: the first one /v1/models lists).")
    tokenizer: Optional[str] = opt(None, help="GGUF file or HF folder whose tokenizer makes prompt sizes exact.")
    target: list[str] = opt(
        [],
        "--target",
        "-t",
        help="Targets to check, e.g. 'ttft<1s' (exit 1 when one is missed); latency ones also define goodput (requests meeting all of them per second).",
    )
    slo: Optional[str] = opt(
        None,
        "--slo",
        help="Per-request SLOs, e.g. 'ttft<2s,tpot<100ms' (ttft, tpot, e2el; as kvtune run --slo): adds slo_attainment, the share of requests meeting all of them, which a target can check ('slo_attainment>99%').",
    )
    api_key: Optional[str] = opt(
        None, "--api-key", help="Bearer token (default $OPENAI_API_KEY); never printed or saved."
    )
    timeout: float = opt(120.0, help="Seconds one request may take before it counts as failed.")
    seed: int = opt(0, help="Seed for prompts and arrivals.")
    save: Optional[Path] = opt(
        None, help="Write results as JSON (vLLM bench serve's key names plus per-request samples)."
    )
    prompt_cache: Optional[str] = opt(
        None,
        "--prompt-cache",
        help="llama-server's prompt cache: off (cache_prompt=false), on, or server (send nothing; the server's default). Default: as kvtune run measures: on for a workload that reuses prefixes (--workload multiturn or trace:FILE, --shared-prefix-fraction), off for synthetic prompts.",
    )
