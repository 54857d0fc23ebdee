"""Flag words -> typed values, each checked once with a one-line error (exit 2): the parsing the
commands share (`kvtune run` and `kvtune bench` read --workload and --think-time alike)."""

from __future__ import annotations

from typing import Any

from kvtune.durations import parse_duration
from kvtune.errors import SpecError
from kvtune.kinds import ProgressMode


def repeats_value(text: str | None) -> int | str | None:
    """--repeats N or --repeats auto (the spec checks the range)."""
    if text is None or text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise SpecError(f"--repeats must be a whole number or 'auto', got {text!r}") from None


def seconds(text: str | None, flag: str) -> float | None:
    """A duration flag (45s, 30m, or bare seconds) as seconds; one line and exit 2 when bad."""
    return None if text is None else parse_duration(text, what=flag)


def pause_seconds(text: str | None, flag: str) -> float | None:
    """A pause flag (--think-time: 0, 500ms, 2s) as seconds; zero is a pause of none."""
    return None if text is None else parse_duration(text, what=flag, zero_ok=True)


def trace_of(workload: str | None) -> str | None:
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


def prices(per_hour: str | None, per_gpu_hour: str | None) -> dict[str, Any]:
    """--price-per-hour / --price-per-gpu-hour as numbers (one line and exit 2 when bad)."""
    from kvtune.objectives.cost import parse_price, price_of

    price_of(per_hour, per_gpu_hour)  # both given: refused
    return {
        "price_per_hour": None if per_hour is None else parse_price(per_hour, "--price-per-hour"),
        "price_per_gpu_hour": None if per_gpu_hour is None else parse_price(per_gpu_hour, "--price-per-gpu-hour"),
    }
