"""The checks of `Workload.validate` for what a workload draws and how its conversations run:
spreads (a sigma of log), think times, prefix groups, multi-turn's clashes. Apart from the
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
