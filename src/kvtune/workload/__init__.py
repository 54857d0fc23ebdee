"""What load a trial drives at the server: the shape of each request and when it is sent.

The default is the issue's demo workload: 8 concurrent users (closed loop), prompts of about 200
tokens, 64 output tokens forced with ``ignore_eos``, and enough requests for four rounds, after
one warm-up round of the same shape that is left out of the metrics.

Two ways to drive load:

- ``mode="closed"``: `concurrency` users, each sending its next request when the last one ended.
- ``mode="open"``: requests arrive at `rate` per second whatever the server does (Poisson, gamma
  with `burstiness`, or constant gaps), at times precomputed from `seed`; `concurrency` then only
  sizes the warm-up.

Either runs `num_requests` requests, or sends for `duration_s` seconds when that is set. Prompts
are synthetic (`prompt_tokens` each) unless `dataset` names a ShareGPT JSON or JSONL file; with
``shared_prefix_fraction > 0`` every request also carries a system prompt of
`shared_prefix_tokens`, the same one for that fraction of requests and a unique one for the
rest, so every request does the same work and only a prefix cache tells them apart; with
`shared_prefix_groups` k > 1 the sharing requests are split among k distinct shared system
prompts (the j-th sharing request gets group j % k), as subsets of users share different ones.
`prompt_spread` / `output_spread` > 0 draw each synthetic request's lengths from a lognormal of
mean `prompt_tokens` / `output_tokens` and that sigma of log (bench/lengths.py, seeded by `seed`
and the request's index, so two configs get the same draws), clamped to [1, `length_cap`]: the
p99, which `request_tokens` sizes a slot for, so every drawn request fits.

With `trace` (a trace file, or a shipped excerpt's name: bench/traces.py) the measured phase
replays the trace instead: an open loop at the trace's arrival times, each request with the
trace's input and output lengths, cut by `trace_window_s` / `trace_requests` (neither set: its
first `num_requests`), its clock sped up
by `trace_speed`, lengths times `trace_length_scale` and clipped to `trace_max_tokens` (left
unset, kvtune sizes it from the trace before the first launch: bench/trace_sizing.py). Its
numeric timestamps are read in `trace_time_unit` (auto: the rule of bench/trace_formats.py);
`trace_model` / `trace_log_type` keep only a BurstGPT trace's rows of that Model / Log Type.

With ``multiturn`` (bench/multiturn.py) each of `concurrency` users holds one conversation at a
time (``mode="open"``: conversations start at `rate` per second at the open loop's arrival times
instead, each then running its turns; `concurrency` only sizes the warm-up): `turns` turns of
`prompt_tokens` new input each (all human turns of a ShareGPT record when `dataset` is set), every
request carrying the history so far (earlier prompts and the server's own answers),
`think_time_s` between a user's turns (`think_spread` > 0: each pause drawn from a lognormal of
that mean, seeded by `seed`, the conversation and the turn). ``ceil(num_requests / turns)``
conversations are measured (open loop with `duration_s`: those starting in it); one ends early when its next turn would not fit `conversation_max_tokens` (default:
`request_tokens`, the context kvtune sizes a slot for). Only a conversation's first turn carries a
nonce, so its turns share their prefix and different conversations do not, unless
``shared_prefix_fraction`` > 0: then every conversation opens with a system prompt of
`shared_prefix_tokens`, one of `shared_prefix_groups` shared ones for that fraction of
conversations (dealt as single requests are) and a unique one for the rest.
Secrets (an API key) never live here: a workload is saved with the results.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from kvtune.setting import setting
from kvtune.workload.checks import (
    ARRIVALS,
    ENDPOINTS,
    MODES,
    MULTITURN_FIELDS,
    TEMPLATE_TOKENS,
    TEMPLATE_TOKENS_PER_TURN,
    TRACE_FIELDS,
    TRACE_READ_FIELDS,
    TRACE_TIME_UNITS,
    check_workload,
)
from kvtune.workload.describe import describe_load, request_parts
from kvtune.workload.lognormal import Z99, length_cap, lognormal_mu, spread_words

__all__ = [
    "ARRIVALS", "ENDPOINTS", "MODES", "REQUEST_TEMPLATE_TOKENS", "TEMPLATE_TOKENS", "TEMPLATE_TOKENS_PER_TURN",
    "TRACE_TIME_UNITS", "Workload", "Z99", "length_cap", "lognormal_mu", "spread_words",
]  # fmt: skip

# What one request adds to its prompt text, by endpoint: a chat request the template's system
# prompt and role markers (a fixed allowance, not counted per model: the demo model's template
# measured 30 tokens on llama-server, usage.prompt_tokens of a one-token message being 31;
# Llama 3's and Qwen 2.5's default ones are about 30-40); a completion a BOS token at most.
REQUEST_TEMPLATE_TOKENS = {"chat": TEMPLATE_TOKENS + TEMPLATE_TOKENS_PER_TURN, "completions": 1}


@dataclass(frozen=True)
class Workload:
    """The load of one run; every field is a setting (kvtune/setting.py): the study file's
    `workload:` keys, `--set workload.KEY=VALUE`, and the traffic flags of run and bench."""

    concurrency: int = setting(
        8,
        most=100_000,
        help="Concurrent users (closed loop); with --rate it only sizes the warm-up.",
        run_flag="--concurrency",
        bench_flag="--concurrency",
        panel="Traffic",
    )
    prompt_tokens: int = setting(
        200,
        most=10_000_000,
        help="Prompt length in tokens (approximate for synthetic prompts; exact with kvtune bench --tokenizer).",
        run_flag="--prompt-tokens",
        bench_flag="--prompt-tokens",
        panel="Traffic",
    )
    output_tokens: int = setting(
        64,
        most=10_000_000,
        help="Output tokens per request, forced with ignore_eos.",
        run_flag="--output-tokens",
        bench_flag="--output-tokens",
        panel="Traffic",
    )
    num_requests: int = setting(
        32, most=10_000_000, help="Measured requests per run.", bench_flag="--num-requests", moved=("--num-requests",)
    )
    warmup_requests: int = setting(
        8,
        most=1_000_000,
        help="Warm-up requests per run, of the same shape, left out of the metrics.",
        moved=("--warmup-requests",),
    )
    request_timeout_s: float = setting(
        120.0,
        most=86400,
        help="Seconds one request may take before it counts as failed (a hung server is a failure).",
        moved=("--timeout",),
    )
    seed: int = setting(
        0,
        help="Seed of the prompts, the drawn lengths and the arrivals (kvtune run: the study's seed unless set).",
        bench_flag="--seed",
    )
    mode: str = setting(
        "closed",
        help="closed: `concurrency` users, each sending its next request when the last ended; open: arrivals at `rate` per second whatever the server does (set by --rate).",
    )
    rate: float | None = setting(
        None,
        most=1_000_000,
        help="Open loop: requests per second (Poisson arrivals unless `arrival`); with multiturn, conversations starting per second.",
        run_flag="--rate",
        panel="Traffic",
    )
    arrival: str = setting("poisson", help="Open-loop arrivals: poisson, gamma or constant.", moved=("--arrival",))
    burstiness: float = setting(
        1.0,
        most=1000,
        help="Gamma shape of the arrivals: 1 is Poisson, below 1 burstier, above 1 more regular.",
        moved=("--burstiness",),
    )
    duration_s: float | None = setting(
        None,
        most=365 * 86400,
        help="Send for this many seconds instead of `num_requests` requests.",
        duration=True,
        moved=("--duration",),
    )
    endpoint: str = setting(
        "chat",
        help="chat (/v1/chat/completions) or completions (/v1/completions).",
        bench_flag="--endpoint",
        moved=("--endpoint",),
    )
    dataset: str | None = setting(
        None,
        help="Prompts from a ShareGPT JSON or JSONL file instead of synthetic ones.",
        run_flag="--dataset",
        bench_flag="--dataset",
        panel="Traffic",
        what="a file path",
    )
    dataset_min_tokens: int = setting(
        0, most=10_000_000, help="Keep dataset prompts of at least this many tokens.", moved=("--dataset-min-tokens",)
    )
    dataset_max_tokens: int | None = setting(
        None, most=10_000_000, help="Keep dataset prompts of at most this many tokens.", moved=("--dataset-max-tokens",)
    )
    shared_prefix_fraction: float = setting(
        0.0,
        help="Fraction of requests sharing one long system prompt (tunes prefix caching honestly: the rest get a unique one of the same length).",
        moved=("--shared-prefix-fraction",),
    )
    shared_prefix_tokens: int = setting(
        0, most=10_000_000, help="Length of that system prompt in tokens.", moved=("--shared-prefix-tokens",)
    )
    shared_prefix_groups: int = setting(
        1,
        most=1_000_000,
        help="Split the requests sharing a system prompt among N distinct shared prompts, dealt in turn, as subsets of users share different ones.",
        moved=("--prefix-groups",),
    )
    prompt_spread: float = setting(
        0.0,
        most=10,
        help="Draw each prompt's length from a lognormal of mean prompt_tokens and this sigma of log, e.g. 0.5 (0: constant); seeded by seed, clamped to [1, its p99], which sizes the slots.",
        moved=("--prompt-spread",),
    )
    output_spread: float = setting(
        0.0,
        most=10,
        help="The same for output lengths: a lognormal of mean output_tokens and this sigma of log (0: constant).",
        moved=("--output-spread",),
    )
    trace: str | None = setting(
        None,
        help="Replay a production trace's arrival times and lengths: a file (Azure CSV, Mooncake JSONL, BurstGPT CSV) or a shipped excerpt (azure-conv, azure-code, mooncake-conv); on the command line --workload trace:FILE.",
        what="a file path",
    )
    trace_requests: int | None = setting(
        None,
        most=100_000_000,
        help="Replay the trace's first N requests (default: num_requests, unless trace_window_s).",
        moved=("--trace-requests",),
    )
    trace_window_s: float | None = setting(
        None,
        most=365 * 86400,
        help="Replay the requests of the trace's first S seconds (trace time), e.g. 60 or 2m.",
        duration=True,
        moved=("--trace-window",),
    )
    trace_speed: float = setting(
        1.0, most=10_000, help="Time scale: 4 replays the trace four times faster.", moved=("--trace-speed",)
    )
    trace_length_scale: float = setting(
        1.0,
        most=1000,
        help="Multiply every input and output length of the trace by F, e.g. 0.25.",
        moved=("--trace-length-scale",),
    )
    trace_max_tokens: int | None = setting(
        None,
        most=10_000_000,
        help="Clip each trace request to N tokens of prompt + output (default: the p99 of the replayed requests, bounded by the model's context).",
        moved=("--trace-max-tokens",),
    )
    trace_time_unit: str = setting(
        "auto",
        help="Unit of the trace's numeric timestamps: s, ms or auto (a JSONL trace's whole numbers are ms, as Mooncake writes them, numbers with a decimal point s; a CSV's numbers are s; Azure's dates need none).",
        moved=("--trace-time-unit",),
    )
    trace_model: str | None = setting(
        None,
        help="BurstGPT trace: replay only the rows of this Model, e.g. ChatGPT.",
        moved=("--trace-model",),
        what="a string (a value of the trace's column)",
    )
    trace_log_type: str | None = setting(
        None,
        help="BurstGPT trace: replay only the rows of this Log Type, e.g. 'Conversation log'.",
        moved=("--trace-log-type",),
        what="a string (a value of the trace's column)",
    )
    multiturn: bool = setting(
        False,
        help="Conversations, each request carrying the history so far; on the command line --workload multiturn.",
    )
    turns: int = setting(4, most=10_000, help="Multi-turn: turns per conversation.", moved=("--turns",))
    think_time_s: float = setting(
        0.0,
        most=86400,
        help="Multi-turn: a user's pause between turns, e.g. 2 or 2s.",
        duration=True,
        moved=("--think-time",),
    )
    conversation_max_tokens: int | None = setting(
        None,
        most=10_000_000,
        help="Multi-turn: end a conversation when its next turn would not fit this many tokens of context (default: room for `turns` turns, as a slot is sized).",
        moved=("--conversation-max-tokens",),
    )
    think_spread: float = setting(
        0.0,
        most=10,
        help="Multi-turn: draw each pause from a lognormal of mean think_time_s and this sigma of log (0: constant); seeded by seed, the conversation and the turn.",
        moved=("--think-spread",),
    )

    @property
    def reuses_prefixes(self) -> bool:
        """Whether requests share prompt prefixes a server's cache should serve, as a user's
        server would (a trace, conversations, a shared system prompt): then caches stay on."""
        return self.trace is not None or self.multiturn or self.shared_prefix_fraction > 0

    @property
    def conversations(self) -> int:
        """Measured conversations of a multi-turn workload: enough for `num_requests` turns."""
        return max(1, math.ceil(self.num_requests / self.turns))

    @property
    def request_tokens(self) -> int:
        """Context one request occupies: prompt (+ system prefix) + output. A slot must hold it.

        With a dataset the prompt part is `dataset_max_tokens` when set (prompts are filtered
        to it), else `prompt_tokens` as a stated guess. A trace's requests are clipped to
        `trace_max_tokens` (which `tuner.build.prepare` sets from the trace when the user did
        not), and the endpoint's template tokens come on top of that exact clip (else prompt +
        output is the same stated guess).
        """
        if self.trace is not None and self.trace_max_tokens is not None:
            return self.trace_max_tokens + self.template_tokens
        prompt = length_cap(self.prompt_tokens, self.prompt_spread)
        if self.dataset and self.dataset_max_tokens:
            prompt = self.dataset_max_tokens
        if self.multiturn:
            if self.conversation_max_tokens is not None:
                return self.conversation_max_tokens
            # the whole last turn: every turn's input and answer, the chat template's share
            turn = prompt + self.output_tokens + TEMPLATE_TOKENS_PER_TURN
            return TEMPLATE_TOKENS + self.shared_prefix_tokens + self.turns * turn
        return prompt + self.shared_prefix_tokens + length_cap(self.output_tokens, self.output_spread)

    @property
    def trace_request_count(self) -> int | None:
        """How many of the trace's first requests a run replays: `trace_requests` when set; all
        those of `trace_window_s` when that is set; else `num_requests`, as any workload measures
        (a whole production trace would make one trial last hours). None: the whole window."""
        if self.trace_requests is not None:
            return self.trace_requests
        return None if self.trace_window_s is not None else self.num_requests

    @property
    def template_tokens(self) -> int:
        """Tokens one request adds to its prompt text on this endpoint (a stated allowance)."""
        return REQUEST_TEMPLATE_TOKENS[self.endpoint]

    def request_parts(self) -> str:
        """What `request_tokens` is made of, for a pre-screen's reason (workload/describe.py)."""
        return request_parts(self)

    def describe(self) -> str:
        """The load in words, for the headers of kvtune run, kvtune bench and the report
        (workload/describe.py)."""
        return describe_load(self)

    def validate(self) -> "Workload":
        """This workload, once every value and how they combine are checked (workload/checks.py):
        a one-line `SpecError` naming the value and the fix otherwise."""
        check_workload(self)
        return self

    def to_dict(self) -> dict:
        """The fields as plain data; the trace fields only when a trace is set, so a workload
        without one reads (and names its study) as it did before traces existed."""
        d = asdict(self)
        if self.trace is None:
            for name in TRACE_FIELDS:
                d.pop(name)
        for name in TRACE_READ_FIELDS:  # newer keys, left out at their defaults (the same names)
            if d.get(name, None) == _TRACE_DEFAULTS[name]:
                d.pop(name, None)
        if not self.multiturn:
            for name in MULTITURN_FIELDS:
                d.pop(name)
        # newer keys, left out at their defaults (a workload without them keeps its study's name)
        for name, default in (
            ("prompt_spread", 0),
            ("output_spread", 0),
            ("think_spread", 0),
            ("shared_prefix_groups", 1),
        ):
            if d.get(name, default) == default:
                d.pop(name, None)
        return d


_TRACE_DEFAULTS = {f.name: f.default for f in fields(Workload) if f.name in TRACE_FIELDS}
