"""The `vllm bench serve` line the verification script prints: the study's load in vLLM's terms.

Whoever wants vLLM's own figure for the deployed server gets the same load, or is told plainly
what vLLM's benchmark cannot express. Checked against vLLM 0.32's `vllm bench serve` options:

- the model: requests name what the server serves (a converted folder, a GGUF's stem), read
  from the trial's argv; `--tokenizer` names an HF id or folder vLLM can tokenize with;
- ShareGPT prompts with the study's forced output length (`--sharegpt-output-len`); vLLM keeps
  prompts of 4..1024 tokens, so a study's own length filter is named as not expressible;
- a shared prefix for a fraction of requests: vLLM gives one prefix to every request
  (`--random-prefix-len`, fraction 1) or repeats N prefixes k times each (`prefix_repetition`),
  so a fraction below 1 becomes the k whose share of reusing requests is nearest, said in a note;
- arrivals: Poisson is burstiness 1, gamma its burstiness, constant gaps burstiness inf;
- a trace: vLLM's `timed_trace` dataset (JSONL of timestamp, lengths, hash ids) replays the
  fitted trace's own times; the rows are written by the script to a temporary file. A request
  with fewer hash ids than blocks (Azure, BurstGPT: none) gets fresh ids, so it shares nothing;
- conversations (multi-turn): `vllm bench serve` sends independent requests, so there is no
  line, only a note naming vLLM's separate multi-turn benchmark (benchmarks/multi_turn): a
  single-turn line of the same lengths would read as the same load and is not;
- goodput: the study's per-request SLOs (--slo) as ``--goodput ttft:2000 tpot:100`` (KEY:VALUE
  in ms, one argument each, keys ttft, tpot, e2el: serve.py's parse_goodput); vLLM counts a
  request good at value <= limit. A percentile target (ttft_p95<1s) is no per-request limit,
  so a study without an SLO gets no --goodput.
Pure: workload and trial in, argv and notes out (the trace file is read, as the run reads it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kvtune.bench.traces import FittedTrace, fitted_trace
from kvtune.errors import SpecError
from kvtune.objectives.slo import Slo
from kvtune.study.spec import StudySpec
from kvtune.workload import Workload

DEMO_HF_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the demo model (spec model None or "demo")
UNKNOWN_HF_ID = "<the model's Hugging Face id>"
# What vLLM's ShareGPT reader keeps (benchmarks/datasets.py: is_valid_sequence), fixed.
VLLM_SHAREGPT_PROMPTS = (4, 1024)
TRACE_PATH_VAR = "VLLM_TRACE"  # the script's variable holding the timed_trace JSONL's path
MULTITURN_NOTE = (
    "no vllm bench serve line: it sends independent requests and cannot replay the study's "
    "multi-turn conversations (each turn carrying the history and the server's answers); the closest is "
    "vLLM's separate multi-turn benchmark, benchmarks/multi_turn in vLLM's repository "
    "(benchmark_serving_multi_turn.py), whose load is not the same either"
)


@dataclass(frozen=True)
class ServedModel:
    name: str  # the model name requests send (the server's --served-model-name, or what it loaded)
    path: str  # the GGUF file or HF folder the server loaded ("" when the argv names none)
    tokenizer: str  # an HF id or folder vllm bench serve can tokenize with


@dataclass(frozen=True)
class VllmLine:
    argv: list[str]
    notes: list[str] = field(default_factory=list)  # what the line cannot express, plainly
    trace_rows: list[str] = field(default_factory=list)  # timed_trace JSONL the script writes


def _flag_value(argv: list[str], *names: str) -> str | None:
    for i, a in enumerate(argv[:-1]):
        if a in names:
            return argv[i + 1]
    return None


def served_model(trial_argv: Sequence[str], spec: StudySpec) -> ServedModel:
    """What the trial's server served and loaded, from its argv (not the spec's model name: a
    vLLM study serves a converted folder, a llama-server study a resolved GGUF path)."""
    argv = [str(a) for a in trial_argv]
    llama = spec.backend == "llama-server"
    path = _flag_value(argv, "--model", *(("-m",) if llama else ("serve",))) or ""
    if llama:
        name = _flag_value(argv, "--alias", "-a") or (Path(path).stem if path else str(spec.model or "demo"))
    else:
        name = _flag_value(argv, "--served-model-name") or path or str(spec.model or "")
    if path and not path.endswith(".gguf"):
        tokenizer = path  # an HF folder or hub id: vLLM reads its tokenizer
    elif spec.model in (None, "", "demo"):
        tokenizer = DEMO_HF_ID
    else:
        tokenizer = UNKNOWN_HF_ID  # a GGUF file: vllm bench serve tokenizes with an HF tokenizer
    return ServedModel(name=name, path=path, tokenizer=tokenizer)


def vllm_line(w: Workload, slo: Slo | None, model: ServedModel) -> VllmLine:
    """The same load as `vllm bench serve` flags (the script appends the base URL and, for a
    trace, ``--dataset-path`` of the rows it writes), with notes on what it cannot express;
    goodput counted against the study's per-request SLOs `slo`, if it had any."""
    notes: list[str] = []
    rows: list[str] = []
    if w.multiturn:  # a single-turn line beside it would read as the same load: there is none
        return VllmLine([], [MULTITURN_NOTE])
    if w.trace is not None:
        try:
            dataset, rows = _trace_dataset(w, notes)
        except SpecError as e:  # exported on a box without the trace: kvtune bench still replays it there
            return VllmLine([], [f"no vllm bench serve line: it replays the trace, unreadable here ({e})"])
    elif w.dataset:
        dataset = _sharegpt_dataset(w, notes)
    else:
        dataset = _random_dataset(w, notes)
    completions = w.endpoint == "completions" or w.trace is not None
    args: list[object] = [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "openai" if completions else "openai-chat",
        "--endpoint",
        "/v1/completions" if completions else "/v1/chat/completions",
        "--model",
        model.name,
    ]
    if model.tokenizer != model.name:
        args += ["--tokenizer", model.tokenizer]
    args += [*dataset, "--ignore-eos", "--num-warmups", w.warmup_requests, "--seed", w.seed]
    args += _schedule(w, notes, has_count="--num-prompts" in dataset)
    args += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99"]
    args += goodput_args(slo)
    return VllmLine([str(a) for a in args], notes, rows)


def goodput_args(slo: Slo | None) -> list[str]:
    """``--goodput ttft:2000 tpot:100``: vLLM's goodput counts the requests meeting the same
    per-request SLOs as kvtune's slo_attainment; none without an SLO (targets are no SLOs)."""
    if slo is None:
        return []
    return ["--goodput", *(f"{lim.metric}:{round(lim.seconds * 1000, 3):.12g}" for lim in slo.limits)]


def _schedule(w: Workload, notes: list[str], has_count: bool) -> list[object]:
    """Request count and arrivals; a trace's own times need neither rate nor concurrency."""
    if w.trace is not None:
        return []
    count = w.num_requests
    if w.duration_s and w.mode == "open":
        count = max(1, math.ceil(w.rate * w.duration_s)) if w.rate else count
        notes.append(f"vllm bench serve sends a count, not for a duration: {count} requests = rate x duration")
    elif w.duration_s:
        notes.append(f"vllm bench serve sends a count, not for a duration: {count} requests, not {w.duration_s:g} s")
    out: list[object] = [] if has_count else ["--num-prompts", count]
    if w.mode != "open":
        return [*out, "--max-concurrency", w.concurrency, "--request-rate", "inf"]
    burstiness = {"poisson": 1.0, "gamma": w.burstiness, "constant": "inf"}[w.arrival]
    return [*out, "--request-rate", w.rate, "--burstiness", burstiness]


def _sharegpt_dataset(w: Workload, notes: list[str]) -> list[object]:
    low, high = VLLM_SHAREGPT_PROMPTS
    if w.dataset_min_tokens or w.dataset_max_tokens:
        notes.append(
            f"vllm bench serve keeps ShareGPT prompts of {low}..{high} tokens (fixed): it cannot apply "
            f"dataset_min_tokens={w.dataset_min_tokens}, dataset_max_tokens={w.dataset_max_tokens}"
        )
    if str(w.dataset).endswith(".jsonl"):
        notes.append("vllm bench serve reads ShareGPT as one JSON list: convert the JSONL file first")
    if w.shared_prefix_fraction:
        notes.append("vllm bench serve adds no shared system prompt to ShareGPT prompts")
    return ["--dataset-name", "sharegpt", "--dataset-path", w.dataset, "--sharegpt-output-len", w.output_tokens]


def _random_dataset(w: Workload, notes: list[str]) -> list[object]:
    f = w.shared_prefix_fraction
    if w.prompt_spread or w.output_spread:
        notes.append("vllm bench serve draws no lognormal lengths: its requests have the constant means")
    if not f:
        return [
            "--dataset-name",
            "random",
            "--random-input-len",
            w.prompt_tokens,
            "--random-output-len",
            w.output_tokens,
        ]
    k = w.shared_prefix_groups
    if f == 1.0 and k > 1:  # every request shares one of k prefixes: vLLM's prefix repetition
        per_group = max(1, w.num_requests // k)
        if k * per_group != w.num_requests:
            notes.append(f"vllm bench serve uses each of {k} prefixes equally often: {k * per_group} requests")
        return _prefix_repetition(w, k, per_group)
    if f == 1.0:  # one prefix for every request: vLLM's random prefix
        return [
            "--dataset-name",
            "random",
            "--random-input-len",
            w.prompt_tokens,
            "--random-output-len",
            w.output_tokens,
            "--random-prefix-len",
            w.shared_prefix_tokens,
        ]
    per_prefix = nearest_repeats(f, w.num_requests)
    prefixes = w.num_requests // per_prefix
    shared = f"one prefix among {f:.0%} of requests" + (f" (in {k} groups)" if k > 1 else "")
    notes.append(
        f"vllm bench serve cannot share {shared}: {prefixes} prefixes used "
        f"{per_prefix} times each, so {1 - 1 / per_prefix:.0%} of {prefixes * per_prefix} requests reuse one"
    )
    return _prefix_repetition(w, prefixes, per_prefix)


def _prefix_repetition(w: Workload, prefixes: int, per_prefix: int) -> list[object]:
    """vLLM's prefix_repetition dataset: `prefixes` shared prefixes, each used `per_prefix` times."""
    return [
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-prefix-len",
        w.shared_prefix_tokens,
        "--prefix-repetition-suffix-len",
        w.prompt_tokens,
        "--prefix-repetition-num-prefixes",
        prefixes,
        "--prefix-repetition-output-len",
        w.output_tokens,
        "--num-prompts",
        prefixes * per_prefix,
    ]


def nearest_repeats(fraction: float, requests: int) -> int:
    """Uses per prefix k (1..requests) whose share of requests reusing a prefix, 1 - 1/k, is
    nearest `fraction` (the share of kvtune's requests that carry the one shared prefix)."""
    return min(range(1, max(1, requests) + 1), key=lambda k: (abs(1 - 1 / k - fraction), k))


def _trace_dataset(w: Workload, notes: list[str]) -> tuple[list[object], list[str]]:
    fitted = fitted_trace(w)
    if w.endpoint == "chat":
        notes.append("vllm bench serve replays a trace through /v1/completions only (timed_trace sends token ids)")
    notes.append(f"vllm bench serve's timed_trace: {fitted.describe()}, same times, lengths and shared blocks")
    dataset: list[object] = [
        "--dataset-name",
        "timed_trace",
        "--timed-trace-chunk-hash-size",
        fitted.block_tokens,
        "--num-prompts",
        len(fitted.requests),
    ]  # the script appends --dataset-path "$VLLM_TRACE", the file it writes the rows to
    return dataset, timed_trace_rows(fitted)


def timed_trace_rows(fitted: FittedTrace) -> list[str]:
    """vLLM timed_trace JSONL rows for the fitted trace: seconds, lengths, one hash id per block.
    Blocks past a request's own ids get fresh ids (unique: no reuse the trace did not have)."""
    size = fitted.block_tokens
    fresh = 1 + max((h for r in fitted.requests for h in r.hash_ids), default=-1)
    rows = []
    for r in fitted.requests:
        blocks = math.ceil(r.input_tokens / size)
        ids = list(r.hash_ids[:blocks])
        while len(ids) < blocks:
            ids.append(fresh)
            fresh += 1
        row = {"timestamp": round(r.at_s, 6), "input_length": r.input_tokens, "output_length": r.output_tokens}
        rows.append(json.dumps({**row, "hash_ids": ids}, separators=(",", ":")))
    return rows
