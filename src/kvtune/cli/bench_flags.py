"""The front door of `kvtune bench`: the everyday flags; any other workload setting with
`--set KEY=VALUE` (the study file's `workload:` keys, kvtune/setting.py). A flag that sets a
workload setting takes its help from the declaration (`from_setting`). What was typed,
unchecked: cli/bench.py turns it into a checked `Workload` and runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kvtune.cli.flag_record import arg, from_setting, opt


@dataclass(frozen=True)
class BenchFlags:
    """What `kvtune bench` was given, flag by flag (None: not given)."""

    url: str = arg(..., help="Base URL of a running OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    concurrency: Optional[int] = from_setting("workload", "concurrency", command="bench")
    rate: Optional[str] = opt(
        None,
        help="Requests per second (open loop, arrivals precomputed from --seed); a list such as 1,2,4,8 sweeps the rates, one run each, and prints the goodput curve. With --workload multiturn: conversations starting per second (--concurrency then sizes only the warm-up).",
    )
    prompt_tokens: Optional[int] = from_setting("workload", "prompt_tokens", command="bench")
    output_tokens: Optional[int] = from_setting("workload", "output_tokens", command="bench")
    num_requests: Optional[int] = from_setting("workload", "num_requests", command="bench")
    workload_kind: Optional[str] = opt(
        None,
        "--workload",
        help="multiturn replays conversations, each request carrying the history so far (--set workload.turns=N, workload.think_time_s=S). trace:FILE replays a trace's arrival times and lengths (as kvtune run --workload trace:FILE).",
    )
    dataset: Optional[str] = from_setting("workload", "dataset", command="bench")
    endpoint: Optional[str] = from_setting("workload", "endpoint", command="bench")
    seed: Optional[int] = from_setting("workload", "seed", command="bench")
    set: list[str] = opt(
        [],
        "--set",
        help="Any other workload setting, repeatable: KEY=VALUE with the study file's workload key, e.g. --set workload.arrival=gamma --set workload.burstiness=0.5 (`kvtune settings` lists them).",
    )
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
        help="Per-request SLOs, e.g. 'ttft<2s,tpot<100ms' (ttft, tpot, e2el; as kvtune run's slo): adds slo_attainment, the share of requests meeting all of them, which a target can check ('slo_attainment>99%').",
    )
    api_key: Optional[str] = opt(
        None, "--api-key", help="Bearer token (default $OPENAI_API_KEY); never printed or saved."
    )
    save: Optional[str] = opt(
        None, help="Write results as JSON (vLLM bench serve's key names plus per-request samples)."
    )
    prompt_cache: Optional[str] = opt(
        None,
        "--prompt-cache",
        help="llama-server's prompt cache: off (cache_prompt=false), on, or server (send nothing; the server's default). Default: as kvtune run measures: on for a workload that reuses prefixes (--workload multiturn or trace:FILE, a shared prefix), off for synthetic prompts.",
    )
