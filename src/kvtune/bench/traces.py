"""Production traces: when each request arrived and how long it was, read from the file's content.

A trace replays real traffic: arrival times (open loop, sent at the trace's times however the
server keeps up) and each request's input and output lengths. Three shapes, told apart by what
the file holds, never by its name:

- Azure LLM inference trace 2023 (CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``, timestamps
  as ``2023-11-16 18:15:46.6805900``): lengths only, so every prompt is unique;
- Mooncake (JSONL ``{"timestamp": ms, "input_length", "output_length", "hash_ids"}``): one hash
  id per 512-token block of the prompt; equal ids are equal blocks (trace_prompts.py builds
  them so), which is the reuse a prefix cache sees;
- BurstGPT (CSV ``Timestamp,Model,Request tokens,Response tokens,...``, seconds from the start):
  the same reader as Azure's; rows with no response (failed requests in the log) are skipped.

`fit_trace` cuts a trace to what a trial may take and the hardware can serve: a time window
and/or the first N requests, a speed factor on the clock, lengths scaled and clipped to the
context a slot holds. `FittedTrace.describe()` says each of those in the run's summary line.
Small excerpts of the real files ship in kvtune/data/traces (their README gives source and
licence); `resolve_trace` finds them by name. Every bad input is a one-line `SpecError`.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kvtune.errors import SpecError
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
_AZURE = ("timestamp", "contexttokens", "generatedtokens")
_BURSTGPT = ("timestamp", "request tokens", "response tokens")


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


def resolve_trace(spec: str) -> Path:
    """A shipped excerpt's name (azure-conv, azure-code, mooncake-conv) or a file path -> its path."""
    if spec in SHIPPED:
        return TRACES_DIR / SHIPPED[spec]
    return Path(spec).expanduser()


def read_trace(spec: str | Path) -> Trace:
    """The trace in `spec` (a shipped name or a path), its format detected from the content,
    requests in arrival order with times from the first one."""
    path = resolve_trace(str(spec))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        names = ", ".join(SHIPPED)
        raise SpecError(f"trace file {str(path)!r} does not exist (shipped traces: {names})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read trace {str(path)!r}: {e}") from e
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise SpecError(f"trace {str(path)!r} is empty")
    if first.startswith("{"):
        fmt, rows = "mooncake", _mooncake_rows(text, path)
    else:
        fmt, rows = _csv_rows(text, path)
    if not rows:
        raise SpecError(f"trace {str(path)!r} holds no requests")
    rows.sort(key=lambda r: r.at_s)
    t0 = rows[0].at_s
    reqs = tuple(TraceRequest(r.at_s - t0, r.input_tokens, r.output_tokens, r.hash_ids) for r in rows)
    return Trace(path.stem, fmt, reqs)


def _count(value: Any, where: str) -> int:
    try:
        n = int(float(value))
    except (TypeError, ValueError):
        raise SpecError(f"{where}: expected a token count, got {value!r}") from None
    if n < 0:
        raise SpecError(f"{where}: a token count cannot be negative, got {n}")
    return n


def _mooncake_rows(text: str, path: Path) -> list[TraceRequest]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"trace {path.name} line {n}"
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise SpecError(f"{where} is not valid JSON: {e}") from e
        missing = [
            k for k in ("timestamp", "input_length", "output_length") if not isinstance(rec, dict) or k not in rec
        ]
        if missing:
            raise SpecError(f"{where} lacks {', '.join(missing)} (a Mooncake trace record)")
        ids = rec.get("hash_ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise SpecError(f"{where}: hash_ids must be a list of integers")
        at = float(rec["timestamp"]) / 1000.0  # milliseconds
        rows.append(
            TraceRequest(at, _count(rec["input_length"], where), _count(rec["output_length"], where), tuple(ids))
        )
    return rows


def _csv_rows(text: str, path: Path) -> tuple[str, list[TraceRequest]]:
    reader = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(reader)]
    if all(h in header for h in _AZURE):
        fmt, cols = "azure", [header.index(h) for h in _AZURE]
    elif all(h in header for h in _BURSTGPT):
        fmt, cols = "burstgpt", [header.index(h) for h in _BURSTGPT]
    else:
        raise SpecError(
            f"trace {path.name}: unknown format (header {','.join(header)[:80]!r}): expected an Azure "
            f"CSV (TIMESTAMP,ContextTokens,GeneratedTokens), a BurstGPT CSV (Timestamp,...,Request "
            f"tokens,Response tokens) or Mooncake JSONL"
        )
    rows = []
    for n, rec in enumerate(reader, 2):
        if not rec or not any(c.strip() for c in rec):
            continue
        where = f"trace {path.name} line {n}"
        if len(rec) <= max(cols):
            raise SpecError(f"{where} has {len(rec)} columns, the header {len(header)}")
        at_raw, inp, out = (rec[c].strip() for c in cols)
        output = _count(out, where)
        if fmt == "burstgpt" and output == 0:
            continue  # a failed request in the log: nothing was generated
        at = _azure_time(at_raw, where) if fmt == "azure" else _seconds(at_raw, where)
        rows.append(TraceRequest(at, _count(inp, where), output))
    return fmt, rows


def _seconds(text: str, where: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise SpecError(f"{where}: expected a timestamp in seconds, got {text!r}") from None
    if not math.isfinite(v):
        raise SpecError(f"{where}: timestamp {text!r} is not finite")
    return v


def _azure_time(text: str, where: str) -> float:
    """``2023-11-16 18:15:46.6805900`` (seven fractional digits: more than datetime parses) -> s."""
    whole, _, frac = text.partition(".")
    try:
        base = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").timestamp()
        return base + (float("0." + frac) if frac else 0.0)
    except ValueError:
        raise SpecError(f"{where}: expected a timestamp like 2023-11-16 18:15:46.68, got {text!r}") from None


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


def _clip(inp: int, out: int, max_tokens: int | None) -> tuple[int, int, bool]:
    """Prompt first, then output, shortened so prompt + output fits `max_tokens` (each >= 1)."""
    if max_tokens is None or inp + out <= max_tokens:
        return inp, out, False
    inp = max(1, max_tokens - out)
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
    for r in chosen:
        inp = max(1, round(r.input_tokens * fit.length_scale))
        gen = max(1, round(r.output_tokens * fit.length_scale))
        inp, gen, cut = _clip(inp, gen, fit.max_tokens)
        clipped += cut
        out.append(TraceRequest(r.at_s / fit.speed, inp, gen, r.hash_ids))
    return FittedTrace(trace, fit, tuple(out), clipped)


def fitted_trace(workload: Workload) -> FittedTrace:
    """The trace a workload replays (its `trace`), fitted as its `trace_*` fields say."""
    if workload.trace is None:
        raise SpecError("this workload replays no trace (workload.trace is not set)")
    fit = TraceFit(
        requests=workload.trace_requests,
        window_s=workload.trace_window_s,
        speed=workload.trace_speed,
        length_scale=workload.trace_length_scale,
        max_tokens=workload.trace_max_tokens,
    )
    return fit_trace(read_trace(workload.trace), fit)
