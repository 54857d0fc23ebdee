"""How a capacity is said, with its unit: users, req/s, or a multiple of a trace's recorded rate.

The capacity objective's figure is one number (``metrics["capacity"]``), and what it counts
depends on the workload: concurrent users in closed loop, requests per second in open loop, and
on a trace the speed factor of the replay (tuner/trial/capacity.py, the search). A trace's capacity
is recorded under `TRACE_SPEED_KEY` too, so any reader of results.json (the run's summary,
`kvtune show`, `kvtune report`, the progress rows) can say it as "holds this trace at 2.5x its
recorded rate with every target met" without being told the workload. Pure.
"""

from __future__ import annotations

from typing import Any, Mapping

from kvtune.workload import Workload

TRACE_SPEED_KEY = "capacity_trace_speed"  # the speed factor held (0: none held)
TRACE_LOWEST_KEY = "capacity_trace_lowest"  # the slowest speed the search tried
TRACE_UNIT = "x recorded rate"


def capacity_unit(workload: Workload) -> str:
    """The unit of a capacity measured on `workload`."""
    if workload.trace is not None:
        return TRACE_UNIT
    return "req/s" if workload.mode == "open" else "users"


def capacity_figure(metrics: Mapping[str, Any]) -> str | None:
    """``2.5x recorded rate`` for a trace's capacity, ``8`` for another; None without one."""
    value = metrics.get("capacity")
    if value is None:
        return None
    return f"{value:g}{TRACE_UNIT}" if TRACE_SPEED_KEY in metrics else f"{value:g}"


def trace_capacity_sentence(metrics: Mapping[str, Any] | None) -> str | None:
    """What a trace's capacity means, in one sentence; None when `metrics` hold none (another
    workload, or no capacity search)."""
    m = metrics or {}
    speed = m.get(TRACE_SPEED_KEY)
    if speed is None:
        return None
    if speed <= 0:
        lowest = m.get(TRACE_LOWEST_KEY)
        floor = f" even at {lowest:g}x its recorded rate" if lowest else ""
        return f"does not hold this trace{floor}: a target breaks at every speed tried"
    rate = m.get("offered_rate")
    offered = f" ({rate:.3g} req/s offered)" if rate else ""
    out = f"holds this trace at {speed:g}x its recorded rate{offered} with every target met"
    if m.get("capacity_rechecked"):
        out += ", re-checked at that speed"
    if m.get("capacity_at_cap"):
        out += "; that is the search's cap, so a lower bound"
    if m.get("capacity_client_limited"):
        out += "; the client fell behind a faster replay, so a lower bound"
    return out


def outcome_sentence(confirmation: Mapping[str, Any] | None, metrics: Mapping[str, Any] | None) -> str | None:
    """The sentence for a trial: from its re-measurement when it has one, else its first."""
    again = (confirmation or {}).get("metrics")
    return trace_capacity_sentence(again) or trace_capacity_sentence(metrics)
