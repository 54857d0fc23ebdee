"""A workload in words: the load line of kvtune run's and kvtune bench's headers and the report
(`describe_load`), and what a request's context is made of for a pre-screen's reason
(`request_parts`). Apart from the dataclass (workload/__init__.py), which declares the settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvtune.workload.lognormal import length_cap, spread_words, think_words

if TYPE_CHECKING:
    from kvtune.workload import Workload


def request_parts(w: Workload) -> str:
    """What `request_tokens` is made of, for a pre-screen's reason."""
    if w.trace is not None and w.trace_max_tokens is not None:
        return f"the trace's requests clipped to {w.trace_max_tokens} + {w.template_tokens} template tokens"
    if w.trace is not None:
        return f"trace not sized: prompt {w.prompt_tokens} + output {w.output_tokens}"
    prompt = length_cap(w.prompt_tokens, w.prompt_spread)
    output = length_cap(w.output_tokens, w.output_spread)
    p99 = " (p99 of the drawn lengths)" if w.prompt_spread or w.output_spread else ""
    return f"prompt {prompt} + output {output}{p99}"


def describe_load(w: Workload) -> str:
    """The load in words, for the headers of kvtune run, kvtune bench and the report: a
    trace, conversations, an open loop or concurrent users, with the sizes."""
    if w.trace is not None:
        n, window = w.trace_request_count, w.trace_window_s
        if window is None:
            cut = f"its first {n} requests"
        else:
            cut = (f"its first {n} requests in " if n is not None else "the requests of ") + f"its first {window:g} s"
        if w.trace_speed == 1 and w.trace_length_scale == 1:
            return f"trace {w.trace} at its own arrival times and lengths, {cut}"
        times = "its own arrival times" if w.trace_speed == 1 else f"{w.trace_speed:g}x its recorded rate"
        lengths = "its own lengths" if w.trace_length_scale == 1 else f"lengths scaled by {w.trace_length_scale:g}"
        return f"trace {w.trace} at {times}, {lengths}, {cut}"
    if w.multiturn:
        return _describe_conversations(w)
    if w.rate is not None:
        users = f"open loop at {w.rate:g} req/s ({w.arrival})"
    else:
        users = f"{w.concurrency} concurrent users"
    prompts = f"prompts of {w.dataset}" if w.dataset else f"{w.prompt_tokens} prompt"
    if w.prompt_spread > 0:
        prompts = "prompts " + spread_words(w.prompt_tokens, w.prompt_spread)
    if w.output_spread > 0:
        return f"{users}, {prompts} / outputs {spread_words(w.output_tokens, w.output_spread)}{_shared(w)}"
    return f"{users}, {prompts} / {w.output_tokens} output tokens{_shared(w)}"


def _shared(w: Workload, who: str = "requests") -> str:
    """The shared system prompt in words, when some requests (or conversations) share one."""
    if w.shared_prefix_fraction <= 0:
        return ""
    k = w.shared_prefix_groups
    groups = f", in {k} groups (each group its own prompt)" if k > 1 else ""
    return f"; a {w.shared_prefix_tokens}-token system prompt shared by {w.shared_prefix_fraction:.0%} of {who}{groups}"


def _describe_conversations(w: Workload) -> str:
    """Conversations in words: who starts them (users, or an open loop's rate), their turns."""
    think = think_words(w.think_time_s, w.think_spread)
    think = f", {think}" if think else ""
    if w.dataset:
        what, size = f"conversations of {w.dataset} (each record's human turns)", ""
    else:
        what, size = f"conversations of {w.turns} turns", f"{w.prompt_tokens} new prompt / "
    if w.mode == "open":
        start = f"conversations starting at {w.rate:g}/s ({w.arrival})"
        if w.duration_s is not None:
            who = f"{what}, {start} for {w.duration_s:g} s"
        else:
            who = f"{w.conversations} {what}, {start}"
    else:
        who = f"{w.concurrency} concurrent users replaying {w.conversations} {what}"
    return (
        f"{who}{think}, each turn carrying the history so far; {size}{w.output_tokens} output tokens per turn"
        f"{_shared(w, 'conversations')}"
    )
