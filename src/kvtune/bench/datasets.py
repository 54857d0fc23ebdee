"""Prompt datasets: ShareGPT JSON, or JSONL of prompts, filtered by length.

Accepted shapes (detected from the content, not the file name):

- ShareGPT JSON: a list of ``{"conversations": [{"from": "human", "value": ...}, ...]}``; the
  first human turn is the prompt (``"role": "user"`` / ``"content"`` spellings work too);
- a JSON list of prompt strings or of ``{"prompt": ...}`` objects;
- JSONL: one ``{"prompt": ...}`` object, ShareGPT record or JSON string per line.

For multi-turn workloads `load_conversations` keeps every human turn of each ShareGPT record, in
order (the dataset's own answers are not sent: the server's answers make the history).

Records with no usable prompt (no human turn, empty text) are skipped and counted. The length
filter counts tokens when a tokenizer is given, else words, and says which. Every expected
failure (missing file, bad JSON, nothing left after filtering) is a one-line `SpecError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kvtune.errors import SpecError
from kvtune.readable import check_regular_file

_HUMAN = {"human", "user"}


@dataclass(frozen=True)
class DatasetPrompts:
    path: str
    prompts: list[str]
    records: int  # records read
    usable: int  # records with a prompt
    counted_by: str  # "tokens (exact)", "tokens (approximate)" or "words"

    def describe(self) -> str:
        return (
            f"dataset {Path(self.path).name}: {len(self.prompts)} prompts kept of "
            f"{self.records} records (length counted in {self.counted_by})"
        )


def _first_human(conv: Any) -> str | None:
    if not isinstance(conv, list):
        return None
    for turn in conv:
        if isinstance(turn, dict) and str(turn.get("from", turn.get("role", ""))).lower() in _HUMAN:
            text = turn.get("value", turn.get("content"))
            return text if isinstance(text, str) else None
    return None


def _prompt_of(rec: Any) -> str | None:
    if isinstance(rec, str):
        return rec
    if not isinstance(rec, dict):
        return None
    if isinstance(rec.get("prompt"), str):
        return rec["prompt"]
    for key in ("conversations", "conversation", "messages"):
        if key in rec:
            return _first_human(rec[key])
    return None


def _read_records(path: Path) -> list[Any]:
    where = str(path)
    check_regular_file(path, f"dataset {where!r}")  # a named pipe would block the read, a device never end
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is skipped, as a trace's
    except FileNotFoundError:
        raise SpecError(f"dataset file {where!r} does not exist") from None
    except IsADirectoryError:
        raise SpecError(f"dataset {where!r} is a directory: give a ShareGPT .json or a .jsonl file") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"dataset {where!r} is not UTF-8 text: {e.reason} at byte {e.start}") from e
    except OSError as e:
        raise SpecError(f"cannot read dataset {where!r}: {e.strerror}") from e
    stripped = text.lstrip()
    if not stripped:
        raise SpecError(f"dataset {where!r} is empty")
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SpecError(f"dataset {where!r} is not valid JSON: {e}") from e
        return data
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as e:
            hint = " (a JSON file must hold a list; JSONL one record per line)" if n == 1 else ""
            raise SpecError(f"dataset {where!r} line {n} is not valid JSON: {e}{hint}") from e
    return records


def load_prompts(
    path: str | Path,
    *,
    count: Callable[[str], int] | None = None,
    count_exact: bool = False,
    min_tokens: int = 0,
    max_tokens: int | None = None,
) -> DatasetPrompts:
    """The dataset's prompts, in file order, whose length is within [min_tokens, max_tokens].

    `count` is a token counter (see tokenizer.py); without one the bounds are in words.
    """
    p = Path(path).expanduser()
    records = _read_records(p)
    if not isinstance(records, list):
        raise SpecError(f"dataset {str(p)!r} must hold a list of records, got {type(records).__name__}")
    prompts = [t for t in map(_prompt_of, records) if isinstance(t, str) and t.strip()]
    if not prompts:
        raise SpecError(
            f"dataset {str(p)!r} has no prompts: expected ShareGPT records "
            f'(conversations with a human turn), {{"prompt": ...}} objects or strings'
        )
    length = count if count is not None else (lambda t: len(t.split()))
    by = ("tokens (exact)" if count_exact else "tokens (approximate)") if count else "words"
    kept = [
        t for t, n in ((t, length(t)) for t in prompts) if n >= min_tokens and (max_tokens is None or n <= max_tokens)
    ]
    if not kept:
        hi = "no limit" if max_tokens is None else str(max_tokens)
        raise SpecError(
            f"dataset {str(p)!r}: none of its {len(prompts)} prompts is between "
            f"{min_tokens} and {hi} {by.split()[0]} long"
        )
    return DatasetPrompts(str(p), kept, len(records), len(prompts), by)


def human_turns(rec: Any) -> list[str]:
    """Every human turn's text of one ShareGPT record, in order (empty when it has none)."""
    conv = None
    if isinstance(rec, dict):
        conv = next((rec[k] for k in ("conversations", "conversation", "messages") if k in rec), None)
    if not isinstance(conv, list):
        return []
    turns = []
    for turn in conv:
        if isinstance(turn, dict) and str(turn.get("from", turn.get("role", ""))).lower() in _HUMAN:
            text = turn.get("value", turn.get("content"))
            if isinstance(text, str) and text.strip():
                turns.append(text)
    return turns


@dataclass(frozen=True)
class DatasetConversations:
    path: str
    conversations: list[list[str]]  # each: the human turns, in order
    records: int

    def describe(self) -> str:
        turns = sum(len(c) for c in self.conversations)
        return (
            f"dataset {Path(self.path).name}: {len(self.conversations)} conversations of "
            f"{self.records} records, {turns / len(self.conversations):.1f} human turns each"
        )


def load_conversations(path: str | Path) -> DatasetConversations:
    """The ShareGPT records with at least one human turn, each as its list of human turns."""
    p = Path(path).expanduser()
    records = _read_records(p)
    if not isinstance(records, list):
        raise SpecError(f"dataset {str(p)!r} must hold a list of records, got {type(records).__name__}")
    convs = [t for t in map(human_turns, records) if t]
    if not convs:
        raise SpecError(
            f"dataset {str(p)!r} has no conversations: a multi-turn workload needs ShareGPT records "
            f'({{"conversations": [{{"from": "human", "value": ...}}, ...]}})'
        )
    return DatasetConversations(str(p), convs, len(records))
