"""How big a server's slot must be for a trace, decided from the trace before any server starts.

A slot sized from the synthetic workload's prompt + output (264 tokens by default) holds almost
none of a production trace's requests: the study then ends "no feasible config" without having
measured the trace. Here the replayed requests' own lengths decide (those a trial replays: the
window and count cut, lengths scaled):

- the clip (`trace_max_tokens`, prompt + output per request) is the p99 of prompt + output
  (nearest rank), so one request in a hundred at most is shortened, bounded by the model's
  context (the GGUF's ``context_length`` / config.json's ``max_position_embeddings``, as the
  launcher read them) less the endpoint's template allowance (workload.REQUEST_TEMPLATE_TOKENS);
- the slot holds the clip plus that allowance (`Workload.request_tokens`): a clipped prompt
  does not overflow once the chat template is applied.

A user's own `trace_max_tokens` is kept (checked against the model). What the clip changes is
said in one line before the first launch: the share of requests clipped, the rows the reader
skipped and why, and for a trace with hash ids the prefix reuse before and after the clip (a
clipped prompt keeps whole blocks, but its unshared tail is what goes, so the share of prompt
tokens a cache can reuse rises). A trace no request of which fits the model is refused (one
line, exit 2): replaying it clipped whole would not be that trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvtune.bench.traces import FittedTrace, Trace, TraceFit, TraceRequest, fit_trace, read_trace, trace_read
from kvtune.errors import SpecError
from kvtune.workload import Workload

PERCENTILE = 0.99
_UNITS = {"s": "timestamps in s", "ms": "timestamps in ms", "datetime": "timestamps as dates and times"}


@dataclass(frozen=True)
class TraceSizing:
    """The slot a trace needs and what fitting it to that slot changed."""

    trace: Trace
    replayed: FittedTrace  # the requests as the run replays them, clipped
    p99_tokens: int  # p99 of prompt + output over the replayed requests, before the clip
    template_tokens: int
    model_context: int | None  # None: the model's context is not known here
    explicit: bool  # the clip is the user's trace_max_tokens
    reuse_before: float | None  # share of prompt tokens in repeated hash-id blocks (None: no ids)
    reuse_after: float | None

    @property
    def max_tokens(self) -> int:
        assert self.replayed.fit.max_tokens is not None
        return self.replayed.fit.max_tokens

    @property
    def context_tokens(self) -> int:
        """What one slot must hold: the clip and the template allowance."""
        return self.max_tokens + self.template_tokens

    def describe(self) -> str:
        """One line for the header: the trace, the slot and why, what was clipped or skipped."""
        n, t = len(self.replayed.requests), self.trace
        span = self.replayed.offsets[-1] if self.replayed.requests else 0.0
        unit = _UNITS.get(t.time_unit, t.time_unit)
        why = (
            "workload.trace_max_tokens"
            if self.explicit
            else f"p99 of prompt + output {self.p99_tokens}"
            + (f", bounded by the model's {self.model_context}-token context" if self._bounded else "")
        )
        line = (
            f"{t.name} ({t.format}, {unit}): {n} requests over {span:.4g} s; slot "
            f"{self.context_tokens} tokens = clip {self.max_tokens} ({why}) + {self.template_tokens} "
            f"template tokens; {self.replayed.clipped} of {n} ({self.replayed.clipped / n:.0%}) clipped"
        )
        if self.replayed.clipped and self.reuse_before is not None:
            line += f" at whole {self.replayed.block_tokens}-token blocks"
        skipped = "; ".join(f"{count} {reason}" for reason, count in t.skipped)
        line += f", {t.skipped_count} rows skipped" + (f" ({skipped})" if skipped else "")
        if self.reuse_before is not None and self.reuse_after is not None:
            line += f"; prefix reuse {self.reuse_before:.1%} -> {self.reuse_after:.1%} of prompt tokens"
        return line

    def load_hint(self) -> str:
        """What the replay asks of the server, and how to ask less, for a study none of whose
        configs kept up: a production trace can be more than the hardware serves."""
        reqs = self.replayed.requests
        prompt, output = sum(r.input_tokens for r in reqs), sum(r.output_tokens for r in reqs)
        span = self.replayed.offsets[-1] if reqs else 0.0
        return (
            f"the trace's {len(reqs)} requests bring {prompt} prompt and {output} output tokens within "
            f"{span:.4g} s; if the server cannot keep up here, replay it slower (workload.trace_speed: 0.25), "
            f"shorter (workload.trace_length_scale: 0.1) or fewer (workload.trace_requests: N)"
        )

    @property
    def _bounded(self) -> bool:
        return self.model_context is not None and self.max_tokens < self.p99_tokens


def percentile_tokens(requests: tuple[TraceRequest, ...], q: float = PERCENTILE) -> int:
    """Nearest-rank percentile of prompt + output: a length some request really has."""
    totals = sorted(r.input_tokens + r.output_tokens for r in requests)
    return totals[max(0, math.ceil(q * len(totals)) - 1)]


def hash_reuse(requests: tuple[TraceRequest, ...], block_tokens: int) -> float | None:
    """Share of prompt tokens lying in a hash-id block an earlier request already held (as many
    of its tokens as that one held): what a prefix cache of unbounded size could reuse. Mooncake's
    ids are chained (an id names its block and everything before it), so a repeated id is a
    repeated prefix. None for a trace without hash ids."""
    if not any(r.hash_ids for r in requests):
        return None
    held: dict[int, int] = {}
    reused = total = 0
    for r in requests:
        left = r.input_tokens
        total += left
        for hash_id in r.hash_ids:
            if left <= 0:
                break
            n = min(block_tokens, left)
            reused += min(n, held.get(hash_id, 0))
            held[hash_id] = max(n, held.get(hash_id, 0))
            left -= n
    return reused / total if total else None


def _clip_for(w: Workload, name: str, shortest: int, p99: int, model_context: int | None) -> int:
    """The clip: the user's, else the p99; checked against (and bounded by) the model's context."""
    template = w.template_tokens
    if model_context is None:
        return w.trace_max_tokens if w.trace_max_tokens is not None else p99
    limit = model_context - template
    if limit < 2:
        raise SpecError(
            f"the model's context ({model_context} tokens) cannot hold a request of trace {name} "
            f"beside the {template} template tokens: serve a model with a longer context"
        )
    if w.trace_max_tokens is not None:
        if w.trace_max_tokens > limit:
            raise SpecError(
                f"trace_max_tokens {w.trace_max_tokens} + {template} template tokens exceeds the model's "
                f"{model_context}-token context: give workload.trace_max_tokens {limit} or less"
            )
        return w.trace_max_tokens
    if shortest > limit:
        raise SpecError(
            f"trace {name} cannot fit the model: its shortest request is {shortest} tokens of prompt + "
            f"output and the model's {model_context}-token context holds {limit} beside {template} "
            f"template tokens; serve a model with a longer context, or replay it shortened on purpose "
            f"(workload.trace_length_scale, workload.trace_max_tokens)"
        )
    return min(p99, limit)


def size_trace(w: Workload, model_context: int | None) -> TraceSizing:
    """The slot `w`'s trace needs on a model of `model_context` tokens (None: unknown)."""
    if w.trace is None:
        raise SpecError("this workload replays no trace (workload.trace is not set)")
    trace = read_trace(w.trace, trace_read(w))
    fit = TraceFit(w.trace_request_count, w.trace_window_s, w.trace_speed, w.trace_length_scale, None)
    whole = fit_trace(trace, fit)
    shortest = min(r.input_tokens + r.output_tokens for r in whole.requests)
    p99 = percentile_tokens(whole.requests)
    clip = _clip_for(w, trace.name, shortest, p99, model_context)
    replayed = fit_trace(trace, replace(fit, max_tokens=clip))
    return TraceSizing(
        trace=trace,
        replayed=replayed,
        p99_tokens=p99,
        template_tokens=w.template_tokens,
        model_context=model_context,
        explicit=w.trace_max_tokens is not None,
        reuse_before=hash_reuse(whole.requests, whole.block_tokens),
        reuse_after=hash_reuse(replayed.requests, replayed.block_tokens),
    )


def sized_workload(w: Workload, model_context: int | None) -> tuple[Workload, TraceSizing | None]:
    """`w` with its trace's clip set (the slot sizing follows from it), and how it was sized;
    a workload without a trace is returned as it is."""
    if w.trace is None:
        return w, None
    sizing = size_trace(w, model_context)
    return replace(w, trace_max_tokens=sizing.max_tokens), sizing
