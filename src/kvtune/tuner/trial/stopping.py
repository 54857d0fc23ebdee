"""The exact early stop, wired to a measurement: how many requests a run plans, the watch the
load client calls after each measured request, and what a stop saved.

`objectives/early_stop.py` holds the rule (pure, proven at the boundary); this module adapts it
to the tuner's runs. One watch spans every repeat of a trial's measurement, because the verdict
pools the repeats' requests: a target is judged lost only when no completion of *all* the planned
requests could meet it, so a stop in repeat 1 of 3 is as certain as the final verdict, and the
repeats left are skipped. A run with no planned count (a timed closed loop) is never stopped.
The time saved is an estimate: the measured phase, scaled from the requests sent to the requests
planned, minus what it took (``planned / sent x elapsed - elapsed``; requests sent, not answered,
so the users' requests in flight at the stop count as begun).
"""

from __future__ import annotations

from typing import Sequence

from kvtune.bench.arrivals import arrival_offsets_for
from kvtune.bench.multiturn import planned_turns
from kvtune.bench.traces import fitted_trace
from kvtune.errors import TargetError
from kvtune.objectives.early_stop import EarlyStop, provable
from kvtune.objectives.metrics import RequestSample
from kvtune.objectives.targets import Target
from kvtune.workload import Workload


def watched_targets(
    targets: Sequence[Target], baseline: bool, baseline_metrics: dict[str, float] | None
) -> list[Target]:
    """The targets an early stop may watch on a trial. None on the baseline: it is measured in
    full, because its figures anchor what the others are judged by (relative targets such as
    "ttft<1.5x", the best-vs-baseline comparison, the near-miss hints). Relative targets are
    resolved from the baseline's figures; while it has none (or none quiet, tuner/anchor.py),
    only the absolute targets are watched."""
    if baseline:
        return []
    if not any(t.relative for t in targets):
        return list(targets)
    if not baseline_metrics:
        return [t for t in targets if not t.relative]
    try:
        return [t.resolve(baseline_metrics) for t in targets]
    except TargetError:
        return []


def planned_requests(workload: Workload) -> int | None:
    """The measured requests one run of `workload` sends (the load client's own count), or None
    for a closed loop that runs for a duration (it sends as many as the time allows)."""
    if workload.trace is not None:  # the trace's requests, as fitted
        return len(fitted_trace(workload).requests)
    if workload.multiturn:
        return planned_turns(workload)
    if workload.mode == "open":
        if workload.duration_s is not None:
            assert workload.rate is not None
            return len(
                arrival_offsets_for(
                    workload.duration_s, workload.rate, workload.arrival, workload.burstiness, workload.seed
                )
            )
        return workload.num_requests
    return None if workload.duration_s is not None else workload.num_requests


class RunWatch:
    """`stop_when` for the load client: feeds each measured request to one `EarlyStop` over the
    `planned` requests of all repeats and returns its reason once a target can no longer hold."""

    def __init__(self, targets: Sequence[Target], planned: int) -> None:
        self.rule = EarlyStop(targets, planned)

    @classmethod
    def over(cls, targets: Sequence[Target], workload: Workload, repeats: int) -> "RunWatch | None":
        """A watch for `repeats` runs of `workload`, or None when nothing could ever stop it
        (no provable target, or no planned count)."""
        per_run = planned_requests(workload)
        if per_run is None or per_run < 1 or not any(provable(t) for t in targets):
            return None
        return cls(targets, per_run * repeats)

    @property
    def planned(self) -> int:
        return self.rule.planned

    def __call__(self, sample: RequestSample) -> str | None:
        if self.rule.observed >= self.rule.planned:
            return None  # the client sent more than planned: the proof no longer applies
        stop = self.rule.observe(sample)
        if stop is None or stop.observed >= stop.planned:
            return None  # decided by the last request: the run is whole, nothing was cut
        return stop.reason


def saved_seconds(planned: int, sent: int, elapsed_s: float) -> float:
    """The estimated wall time an early stop saved: the measured phase scaled from the requests
    sent to the requests planned, minus what it took (0 when nothing was cut). Sent, not
    answered: a closed loop of c users has c requests in flight, so at the first answer it is
    one round of planned / c in, not one request of planned."""
    if sent <= 0 or sent >= planned or elapsed_s <= 0:
        return 0.0
    return planned / sent * elapsed_s - elapsed_s
