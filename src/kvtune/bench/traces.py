"""Production traces: when each request arrived and how long it was, read from the file's content.

A trace replays real traffic: arrival times (open loop, sent at the trace's times however the
server keeps up) and each request's input and output lengths. The formats (Azure 2023 and 2024,
Mooncake JSONL, kvtune's own exported timed_trace, BurstGPT) and the unit each one's timestamps
are read in are trace_formats.py's; they are told apart by what the file holds, never by its
name. Mooncake's hash ids name the 512-token blocks of each prompt (equal ids are equal blocks,
trace_prompts.py builds them so): the reuse a prefix cache sees.

`fit_trace` cuts a trace to what a trial may take and the hardware can serve: a time window
and/or the first N requests, a speed factor on the clock, lengths scaled and clipped to the
context a slot holds (a prompt with hash ids is cut at a whole block, so no block is left
half-shared). `FittedTrace.describe()` says each of those in the run's summary line; how big a
slot must be for a trace is trace_sizing.py's. Small excerpts of the real files ship in
kvtune/data/traces (their README gives source and licence); `resolve_trace` finds them by name.
Every bad input is a one-line `SpecError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kvtune.bench.trace_formats import TraceRead, csv_rows, jsonl_rows
from kvtune.errors import SpecError
from kvtune.readable import check_regular_file
from kvtune.workload import Workload

# Tokens per Mooncake hash-id block (the trace's own block size).
BLOCK_TOKENS = 512
TRACES_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"
# The shipped excerpts, by the name `--workload trace:NAME` accepts.
SHIPPED = {
    "azure-conv": "azure_conv.csv",
    "azure-code": "azure_code.csv",
    "mooncake-conv": "mooncake_conversation.jsonl",
}


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: `at_s` seconds after the trace's first request."""

    at_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    name: str  # the file's stem, e.g. azure_conv
    format: str  # azure, mooncake or burstgpt
    requests: tuple[TraceRequest, ...]
    # How the timestamps were read: "s", "ms" or "datetime" (a calendar date and time).
    time_unit: str = "s"
    # Rows of the file left out, by reason (a failed request in the log, a filter).
    skipped: tuple[tuple[str, int], ...] = field(default=())

    @property
    def skipped_count(self) -> int:
        return sum(n for _, n in self.skipped)


def resolve_trace(spec: str) -> Path:
    """A shipped excerpt's name (azure-conv, azure-code, mooncake-conv) or a file path -> its path."""
    if spec in SHIPPED:
        return TRACES_DIR / SHIPPED[spec]
    return Path(spec).expanduser()


def read_trace(spec: str | Path, how: TraceRead | None = None) -> Trace:
    """The trace in `spec` (a shipped name or a path), its format detected from the content,
    requests in arrival order with times from the first one. One file read once per change
    (its size and time of change key the cache): every trial of a study replays the same one."""
    path = resolve_trace(str(spec))
    try:
        stat = path.stat()
    except FileNotFoundError:
        names = ", ".join(SHIPPED)
        raise SpecError(f"trace file {str(path)!r} does not exist (shipped traces: {names})") from None
    except OSError as e:
        raise SpecError(f"cannot read trace {str(path)!r}: {e}") from e
    check_regular_file(path, f"trace {str(path)!r}")  # a named pipe would block the read, a device never end
    return _read(str(path), stat.st_mtime_ns, stat.st_size, how or TraceRead())


@lru_cache(maxsize=4)
def _read(where: str, mtime_ns: int, size: int, how: TraceRead) -> Trace:
    path = Path(where)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read trace {where!r}: {e}") from e
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise SpecError(f"trace {where!r} is empty")
    found = jsonl_rows(text, path.name, how) if first.startswith("{") else csv_rows(text, path.name, how)
    if not found.rows:
        skipped = "; ".join(f"{n} skipped: {why}" for why, n in found.skipped.items())
        raise SpecError(f"trace {where!r} holds no requests" + (f" ({skipped})" if skipped else ""))
    rows = sorted(found.rows, key=lambda r: r.at_s)
    t0 = rows[0].at_s
    reqs = tuple(TraceRequest(r.at_s - t0, r.input_tokens, r.output_tokens, r.hash_ids) for r in rows)
    return Trace(path.stem, found.format, reqs, found.time_unit, tuple(found.skipped.items()))


def trace_read(workload: Workload) -> TraceRead:
    """How `workload` reads its trace file (--trace-time-unit, --trace-model, --trace-log-type)."""
    return TraceRead(workload.trace_time_unit, workload.trace_model, workload.trace_log_type)


@dataclass(frozen=True)
class TraceFit:
    """How to fit a trace to a trial: window (trace seconds) and/or first N requests, the clock
    sped up by `speed`, lengths times `length_scale`, clipped to `max_tokens` (prompt + output)."""

    requests: int | None = None
    window_s: float | None = None
    speed: float = 1.0
    length_scale: float = 1.0
    max_tokens: int | None = None


@dataclass(frozen=True)
class FittedTrace:
    """The requests a run replays, times already divided by the speed, lengths scaled/clipped."""

    trace: Trace
    fit: TraceFit
    requests: tuple[TraceRequest, ...]
    clipped: int  # requests shortened to fit max_tokens

    @property
    def offsets(self) -> list[float]:
        """Send offsets (seconds from the measured phase's start), the open loop's schedule."""
        return [r.at_s for r in self.requests]

    @property
    def block_tokens(self) -> int:
        """Tokens per hash-id block after length scaling (the trace's 512 times the scale)."""
        return max(1, round(BLOCK_TOKENS * self.fit.length_scale))

    def describe(self) -> str:
        """``replayed 200 requests of azure_conv (azure), 4x speed, lengths scaled by 0.25``."""
        f = self.fit
        parts = [f"replayed {len(self.requests)} requests of {self.trace.name} ({self.trace.format})"]
        if f.window_s is not None:
            parts.append(f"first {f.window_s:g} s of the trace")
        parts.append(f"{f.speed:g}x speed")
        if f.length_scale != 1.0:
            parts.append(f"lengths scaled by {f.length_scale:g}")
        if f.max_tokens is not None:
            parts.append(f"{self.clipped} clipped to {f.max_tokens} tokens")
        return ", ".join(parts)


def _clip(inp: int, out: int, max_tokens: int | None, block: int | None = None) -> tuple[int, int, bool]:
    """Prompt first, then output, shortened so prompt + output fits `max_tokens` (each >= 1).
    With `block` (a prompt of hash-id blocks) the prompt keeps whole blocks when one fits: a
    block cut short would be a prefix of a block another request holds in full."""
    if max_tokens is None or inp + out <= max_tokens:
        return inp, out, False
    room = max_tokens - out
    if block is not None and room >= block:
        room = room // block * block
    inp = max(1, room)
    out = max(1, min(out, max_tokens - inp))
    return inp, out, True


def fit_trace(trace: Trace, fit: TraceFit) -> FittedTrace:
    """The requests of `trace` the run replays, in order: those in the window, then the first N."""
    if not (fit.speed > 0 and math.isfinite(fit.speed)):
        raise SpecError(f"trace speed must be a positive number, got {fit.speed}")
    if not (fit.length_scale > 0 and math.isfinite(fit.length_scale)):
        raise SpecError(f"trace length scale must be a positive number, got {fit.length_scale}")
    chosen = [r for r in trace.requests if fit.window_s is None or r.at_s < fit.window_s]
    if fit.requests is not None:
        chosen = chosen[: fit.requests]
    if not chosen:
        raise SpecError(f"trace {trace.name}: no request falls in the first {fit.window_s:g} s")
    out: list[TraceRequest] = []
    clipped = 0
    block = max(1, round(BLOCK_TOKENS * fit.length_scale))
    for r in chosen:
        inp = max(1, round(r.input_tokens * fit.length_scale))
        gen = max(1, round(r.output_tokens * fit.length_scale))
        inp, gen, cut = _clip(inp, gen, fit.max_tokens, block if r.hash_ids else None)
        clipped += cut
        out.append(TraceRequest(r.at_s / fit.speed, inp, gen, r.hash_ids))
    return FittedTrace(trace, fit, tuple(out), clipped)


def fitted_trace(workload: Workload) -> FittedTrace:
    """The trace a workload replays (its `trace`), fitted as its `trace_*` fields say."""
    if workload.trace is None:
        raise SpecError("this workload replays no trace (workload.trace is not set)")
    fit = TraceFit(
        requests=workload.trace_request_count,
        window_s=workload.trace_window_s,
        speed=workload.trace_speed,
        length_scale=workload.trace_length_scale,
        max_tokens=workload.trace_max_tokens,
    )
    return fit_trace(read_trace(workload.trace, trace_read(workload)), fit)
