"""The checks of `Workload.validate`: each value's range, how the loop, the prompts, a trace and
conversations combine (`check_workload`), and what a workload draws: spreads (a sigma of log),
think times, prefix groups, multi-turn's clashes. Apart from the
dataclass so its module stays one screen per concern; each refusal is one `SpecError` line that
names the value and the fix.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import TYPE_CHECKING

from kvtune.errors import SpecError

if TYPE_CHECKING:
    from kvtune.workload import Workload

# Tokens the chat template adds: once per conversation (a default system prompt, as SmolLM2's
# template writes one) and per turn (role markers of the user message and of the answer).
TEMPLATE_TOKENS = 32
TEMPLATE_TOKENS_PER_TURN = 12
MULTITURN_FIELDS = ("multiturn", "turns", "think_time_s", "conversation_max_tokens", "think_spread")
ARRIVALS = ("poisson", "gamma", "constant")  # bench/arrivals.py draws the gaps
MODES = ("closed", "open")
ENDPOINTS = ("chat", "completions")
# How a trace's numeric timestamps are read: auto (bench/trace_formats.py's rule), s, ms.
TRACE_TIME_UNITS = ("auto", "s", "ms")
TRACE_READ_FIELDS = ("trace_time_unit", "trace_model", "trace_log_type")
# The settings that apply to a trace only (a workload without a trace leaves them out).
TRACE_FIELDS = (
    "trace",
    "trace_requests",
    "trace_window_s",
    "trace_speed",
    "trace_length_scale",
    "trace_max_tokens",
    *TRACE_READ_FIELDS,
)


def _sigma(name: str, value: object) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf):
        raise SpecError(f"workload.{name} must be a finite number >= 0 (sigma of log; 0 = constant), got {value}")


def check_spreads(w: "Workload") -> None:
    """Spreads are a sigma of log (finite, >= 0) and only for lengths kvtune synthesizes."""
    owners = {"prompt_spread": ("trace", "dataset", "multiturn"), "output_spread": ("trace", "multiturn")}
    for name, own in owners.items():
        value = getattr(w, name)
        _sigma(name, value)
        clash = [n for n in own if getattr(w, n)]
        if value > 0 and clash:
            raise SpecError(
                f"workload.{name} draws synthetic lengths, but {' and '.join(clash)} sets its own: drop {name}"
            )


def check_prefix_groups(w: "Workload") -> None:
    """`shared_prefix_groups` distinct shared system prompts: a count, and only where requests
    share one (shared_prefix_fraction > 0), or it would silently change nothing."""
    k = w.shared_prefix_groups
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= 1):
        raise SpecError(
            f"workload.shared_prefix_groups must be an integer >= 1 (distinct shared system prompts), got {k}"
        )
    if k > 1 and w.shared_prefix_fraction <= 0:
        raise SpecError(
            f"workload.shared_prefix_groups {k} splits the requests that share a system prompt, but none do: "
            "set workload.shared_prefix_fraction > 0 or drop workload.shared_prefix_groups"
        )


def check_multiturn(w: "Workload") -> None:
    """Conversations are chat, closed loop (users) or open (starting at `rate`); their fields
    (turns, think time and its spread, the context ceiling) apply to them only."""
    if not w.multiturn:
        defaults = {f.name: f.default for f in fields(w) if f.name in MULTITURN_FIELDS}
        for name in MULTITURN_FIELDS[1:]:
            if getattr(w, name) != defaults[name]:
                raise SpecError(
                    f"workload.{name} applies to multi-turn only: set workload.multiturn: true (--workload multiturn)"
                )
        return
    clash = ["trace"] if w.trace is not None else []
    clash += ["duration_s (or set mode: open)"] if w.duration_s is not None and w.mode != "open" else []
    clash += ["endpoint: completions"] if w.endpoint != "chat" else []
    if clash:
        raise SpecError(f"workload.multiturn runs chat conversations: drop {', '.join(clash)}")
    if w.turns < 1:
        raise SpecError(f"workload.turns must be at least 1, got {w.turns}")
    if not (isinstance(w.think_time_s, (int, float)) and 0 <= w.think_time_s < math.inf):
        raise SpecError(f"workload.think_time_s must be a number of seconds >= 0, got {w.think_time_s}")
    _sigma("think_spread", w.think_spread)
    if w.think_spread > 0 and w.think_time_s <= 0:
        raise SpecError(
            f"workload.think_spread {w.think_spread:g} draws think times around think_time_s, which is 0: "
            "set workload.think_time_s (e.g. 2s) or drop workload.think_spread"
        )
    least = w.prompt_tokens + w.output_tokens + TEMPLATE_TOKENS
    if w.conversation_max_tokens is not None and w.conversation_max_tokens < least:
        raise SpecError(
            f"workload.conversation_max_tokens ({w.conversation_max_tokens}) cannot hold one turn: "
            f"at least prompt + output + {TEMPLATE_TOKENS} template tokens = {least}"
        )


def check_workload(w: Workload) -> None:
    """Every value of `w` and how they combine; the first that is wrong as a one-line `SpecError`."""
    for name in ("concurrency", "prompt_tokens", "output_tokens", "num_requests"):
        if getattr(w, name) < 1:
            raise SpecError(f"workload.{name} must be at least 1, got {getattr(w, name)}")
    if w.warmup_requests < 0:
        raise SpecError(f"workload.warmup_requests must be >= 0, got {w.warmup_requests}")
    if not _positive(w.request_timeout_s):
        raise SpecError(f"workload.request_timeout_s must be a positive number, got {w.request_timeout_s}")
    if not 0 <= w.seed < 2**32:
        raise SpecError(f"workload.seed must be between 0 and 2**32-1, got {w.seed}")
    if w.mode not in MODES:
        raise SpecError(f"workload.mode must be one of {', '.join(MODES)}, got {w.mode!r}")
    if w.mode == "open" and w.rate is None:
        raise SpecError("workload.mode 'open' needs workload.rate (requests per second)")
    if w.rate is not None and not _positive(w.rate):
        raise SpecError(f"workload.rate must be a positive number of requests/s, got {w.rate}")
    if w.rate is not None and w.mode != "open":
        raise SpecError(
            "workload.rate applies to mode 'open' only: set mode: open, "
            "or drop rate to keep the closed loop of `concurrency` users"
        )
    if w.arrival not in ARRIVALS:
        raise SpecError(f"workload.arrival must be one of {', '.join(ARRIVALS)}, got {w.arrival!r}")
    if not _positive(w.burstiness):
        raise SpecError(f"workload.burstiness must be a positive number, got {w.burstiness}")
    if w.burstiness != 1.0 and w.arrival != "gamma":
        raise SpecError("workload.burstiness needs arrival: gamma (Poisson is burstiness 1)")
    if w.duration_s is not None and not _positive(w.duration_s):
        raise SpecError(f"workload.duration_s must be a positive number of seconds, got {w.duration_s}")
    if w.endpoint not in ENDPOINTS:
        raise SpecError(f"workload.endpoint must be one of {', '.join(ENDPOINTS)}, got {w.endpoint!r}")
    if w.dataset is not None and not str(w.dataset).strip():
        raise SpecError("workload.dataset is empty: give a file path or leave it out")
    if w.dataset_min_tokens < 0:
        raise SpecError(f"workload.dataset_min_tokens must be >= 0, got {w.dataset_min_tokens}")
    if w.dataset_max_tokens is not None:
        if w.dataset_max_tokens < 1:
            raise SpecError(f"workload.dataset_max_tokens must be at least 1, got {w.dataset_max_tokens}")
        if w.dataset_max_tokens < w.dataset_min_tokens:
            raise SpecError(
                f"workload.dataset_max_tokens ({w.dataset_max_tokens}) is below "
                f"dataset_min_tokens ({w.dataset_min_tokens})"
            )
    if not (0.0 <= w.shared_prefix_fraction <= 1.0):
        raise SpecError(f"workload.shared_prefix_fraction must be between 0 and 1, got {w.shared_prefix_fraction}")
    if w.shared_prefix_tokens < 0:
        raise SpecError(f"workload.shared_prefix_tokens must be >= 0, got {w.shared_prefix_tokens}")
    if w.shared_prefix_fraction > 0 and w.shared_prefix_tokens < 1:
        raise SpecError(
            "workload.shared_prefix_fraction > 0 needs shared_prefix_tokens >= 1 "
            "(the length of the shared system prompt)"
        )
    check_spreads(w)
    check_prefix_groups(w)
    check_trace(w)
    check_multiturn(w)


def check_trace(w: Workload) -> None:
    """A trace's settings: only with a trace, and not with what the trace itself sets."""
    defaults = {f.name: f.default for f in fields(w)}
    if w.trace is None:
        for name in TRACE_FIELDS[1:]:
            if getattr(w, name) != defaults[name]:
                raise SpecError(f"workload.{name} applies to a trace only: set workload.trace (--workload trace:FILE)")
        return
    if not str(w.trace).strip():
        raise SpecError("workload.trace is empty: give a trace file or a shipped name (azure-conv, ...)")
    clash = [n for n in ("rate", "dataset", "duration_s") if getattr(w, n) is not None]
    clash += ["mode: open"] if w.mode == "open" else []
    clash += ["shared_prefix_fraction"] if w.shared_prefix_fraction > 0 else []
    if clash:
        raise SpecError(f"workload.trace replays the trace's own arrivals and lengths: drop {', '.join(clash)}")
    if w.trace_requests is not None and w.trace_requests < 1:
        raise SpecError(f"workload.trace_requests must be at least 1, got {w.trace_requests}")
    for name in ("trace_window_s", "trace_speed", "trace_length_scale"):
        value = getattr(w, name)
        if value is not None and not _positive(value):
            raise SpecError(f"workload.{name} must be a positive number, got {value}")
    if w.trace_max_tokens is not None and w.trace_max_tokens < 2:
        raise SpecError(f"workload.trace_max_tokens must be at least 2 (prompt + output), got {w.trace_max_tokens}")
    if w.trace_time_unit not in TRACE_TIME_UNITS:
        raise SpecError(
            f"workload.trace_time_unit must be one of {', '.join(TRACE_TIME_UNITS)}, got {w.trace_time_unit!r}"
        )
    for name in ("trace_model", "trace_log_type"):
        value = getattr(w, name)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise SpecError(f"workload.{name} must be a non-empty value of the trace's column, got {value!r}")


def _positive(x: float) -> bool:
    return isinstance(x, (int, float)) and x > 0 and math.isfinite(x)
