"""The file formats of the public LLM traces, and their timestamps, read into plain rows.

Each format states its timestamp unit; the rule that picks it is the same for every file:

- **Azure LLM inference trace** (CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``). 2023 writes
  wall times with seven fractional digits and no zone (``2023-11-16 18:15:46.6805900``), 2024
  with six and a UTC offset (``2024-05-10 00:00:00.009930+00:00``). Any ``YYYY-MM-DD HH:MM:SS``
  (``T`` or a space between, any number of fractional digits, ``Z`` or ``+HH:MM`` or none, none
  read as UTC) is a date and time: its unit is the calendar, no flag applies.
- **BurstGPT** (CSV ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``):
  ``Timestamp`` is seconds from the log's start. Its ``Model`` (ChatGPT, GPT-4) and ``Log Type``
  (Conversation log, API log) columns filter rows (`TraceRead.model`, `TraceRead.log_type`);
  rows with no response tokens are failed requests and are skipped (and counted as skipped).
- **Mooncake JSONL** (``{"timestamp", "input_length", "output_length", "hash_ids"}``): Mooncake
  writes whole milliseconds (``3000``); vLLM's ``timed_trace`` dataset has the same keys in
  seconds, and that is what kvtune exports (``3.0``: a JSON number with a decimal point).

The rule for numeric timestamps (``time_unit="auto"``): a CSV's are seconds (BurstGPT's unit); a
JSONL file's are milliseconds when every one is written as a whole number (Mooncake's), else
seconds (a decimal point anywhere: ``timed_trace``, kvtune's export). ``time_unit="s"`` or
``"ms"`` (``--trace-time-unit``) overrides it for a file the rule would misread.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from kvtune.errors import SpecError

_SCALE = {"s": 1.0, "ms": 1e-3}
_AZURE = ("timestamp", "contexttokens", "generatedtokens")
_BURSTGPT = ("timestamp", "request tokens", "response tokens")
_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2}:?\d{2})?", re.IGNORECASE
)


@dataclass(frozen=True)
class TraceRead:
    """How to read a trace file: the unit of numeric timestamps, and BurstGPT's row filters
    (None: every row), matched without regard to case or surrounding spaces."""

    time_unit: str = "auto"
    model: str | None = None
    log_type: str | None = None


@dataclass(frozen=True)
class Row:
    """One request as the file has it: `at_s` in seconds on the file's own clock."""

    at_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass
class Rows:
    """What a reader found: the format, the unit its timestamps were read in, the rows, and the
    rows it left out by reason (`skipped`: reason -> count)."""

    format: str
    time_unit: str
    rows: list[Row]
    skipped: dict[str, int] = field(default_factory=dict)


def count(value: Any, where: str) -> int:
    """A token count from the file (``"12"``, ``12``, ``12.0``); one line when it is not one."""
    try:
        n = int(float(value))
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400, inf
        raise SpecError(f"{where}: expected a token count, got {value!r}") from None
    if n < 0:
        raise SpecError(f"{where}: a token count cannot be negative, got {n}")
    return n


def datetime_seconds(text: str) -> float | None:
    """``2024-05-10 00:00:00.009930+00:00`` -> seconds since the epoch (None: not a date and time).
    The fraction is read as a decimal of any length (2023's seven digits exceed datetime's six)."""
    m = _DATETIME.fullmatch(text.strip())
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        base = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None  # 2023-13-45: looks like one, is none
    offset = 0.0
    if zone and zone.upper() != "Z":
        sign = -1.0 if zone[0] == "-" else 1.0
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return base + (float("0." + frac) if frac else 0.0) - offset


def _number(value: Any, where: str, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"{where}: expected a timestamp in {unit}, got {value!r}")
    try:
        v = float(value)
    except ValueError:
        raise SpecError(
            f"{where}: expected a timestamp in {unit} or a date and time like 2024-05-10 00:00:00.0099+00:00, "
            f"got {value!r}"
        ) from None
    if not math.isfinite(v):
        raise SpecError(f"{where}: timestamp {value!r} is not finite")
    return v


def jsonl_rows(text: str, name: str, how: TraceRead) -> Rows:
    """Mooncake (or timed_trace) JSONL: one record per line, units by the module's rule."""
    raw: list[tuple[Any, int, int, tuple[int, ...], str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"trace {name} line {n}"
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
        _number(rec["timestamp"], where, "ms or s")
        raw.append(
            (rec["timestamp"], count(rec["input_length"], where), count(rec["output_length"], where), tuple(ids), where)
        )
    unit = how.time_unit
    if unit == "auto":
        unit = "ms" if all(isinstance(r[0], int) and not isinstance(r[0], bool) for r in raw) else "s"
    scale = _SCALE[unit]
    rows = [Row(float(t) * scale, i, o, ids) for t, i, o, ids, _ in raw]
    return Rows("mooncake", unit, rows)


def csv_rows(text: str, name: str, how: TraceRead) -> Rows:
    """Azure or BurstGPT CSV, told apart by the header."""
    reader = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(reader)]
    if all(h in header for h in _AZURE):
        fmt, cols = "azure", [header.index(h) for h in _AZURE]
    elif all(h in header for h in _BURSTGPT):
        fmt, cols = "burstgpt", [header.index(h) for h in _BURSTGPT]
    else:
        raise SpecError(
            f"trace {name}: unknown format (header {','.join(header)[:80]!r}): expected an Azure "
            f"CSV (TIMESTAMP,ContextTokens,GeneratedTokens), a BurstGPT CSV (Timestamp,...,Request "
            f"tokens,Response tokens) or Mooncake JSONL"
        )
    filters = _filters(header, fmt, name, how)
    out = Rows(fmt, "", [])
    seen: dict[str, set[str]] = {label: set() for _, label, _ in filters}
    for n, rec in enumerate(reader, 2):
        if not rec or not any(c.strip() for c in rec):
            continue
        where = f"trace {name} line {n}"
        if len(rec) <= max([*cols, *(c for c, _, _ in filters)]):
            raise SpecError(f"{where} has {len(rec)} columns, the header {len(header)}")
        at_raw, inp, gen = (rec[c].strip() for c in cols)
        miss = _filtered_out(rec, filters, seen)
        if miss is not None:
            out.skipped[miss] = out.skipped.get(miss, 0) + 1
            continue
        output = count(gen, where)
        if fmt == "burstgpt" and output == 0:
            why = "no response (a failed request in the log)"
            out.skipped[why] = out.skipped.get(why, 0) + 1
            continue
        out.rows.append(Row(_csv_time(at_raw, where, out, how), count(inp, where), output))
    _check_filters_matched(out, filters, seen, name)
    return out


def _csv_time(text: str, where: str, out: Rows, how: TraceRead) -> float:
    """A CSV timestamp: a date and time (its unit the calendar) or a number (`how.time_unit`,
    auto = seconds). The first row decides which; the others must be the same kind."""
    stamp = datetime_seconds(text)
    kind = "datetime" if stamp is not None else "number"
    if not out.time_unit:
        if kind == "datetime" and how.time_unit != "auto":
            raise SpecError(
                f"{where}: the timestamps are dates and times ({text!r}), not numbers: "
                f"drop workload.trace_time_unit {how.time_unit} (it applies to numeric timestamps)"
            )
        out.time_unit = "datetime" if kind == "datetime" else ("s" if how.time_unit == "auto" else how.time_unit)
    if (out.time_unit == "datetime") != (kind == "datetime"):
        want = "a date and time" if out.time_unit == "datetime" else f"a number ({out.time_unit})"
        raise SpecError(f"{where}: expected a timestamp like the first row's, {want}, got {text!r}")
    if stamp is not None:
        return stamp
    return _number(text, where, "seconds" if out.time_unit == "s" else "milliseconds") * _SCALE[out.time_unit]


_FILTER_COLUMNS = (("model", "Model", "workload.trace_model"), ("log type", "Log Type", "workload.trace_log_type"))


def _filters(header: list[str], fmt: str, name: str, how: TraceRead) -> list[tuple[int, str, str]]:
    """(column index, column label, wanted value) for each filter given; a filter on a file
    without that column is refused (it would silently keep every row)."""
    out = []
    for (column, label, flag), wanted in zip(_FILTER_COLUMNS, (how.model, how.log_type)):
        if wanted is None:
            continue
        if column not in header:
            raise SpecError(
                f"trace {name} ({fmt}) has no {label} column: {flag} filters a BurstGPT CSV "
                f"(Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type)"
            )
        out.append((header.index(column), label, wanted.strip()))
    return out


def _filtered_out(rec: list[str], filters: list[tuple[int, str, str]], seen: dict[str, set[str]]) -> str | None:
    """The reason a row is left out by a filter (None: it is kept); records each value seen."""
    miss = None
    for col, label, wanted in filters:
        value = rec[col].strip()
        seen[label].add(value)
        if miss is None and value.lower() != wanted.lower():
            miss = f"{label} is not {wanted}"
    return miss


def _check_filters_matched(
    out: Rows, filters: list[tuple[int, str, str]], seen: dict[str, set[str]], name: str
) -> None:
    """A filter value the file never holds is a typo: say which values it does hold."""
    for _, label, wanted in filters:
        if not any(v.lower() == wanted.lower() for v in seen[label]):
            values = ", ".join(sorted(seen[label])[:8]) or "none"
            raise SpecError(f"trace {name}: no request has {label} {wanted!r} (its values: {values})")
