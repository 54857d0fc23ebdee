"""The load that holds, when nothing met the targets at the load asked.

A "no" says what would work (study/what_would_work.py): besides the best figures and the
nearest config, the load at which the targets hold on this box. This module measures it: one
fresh server of the nearest config (`what_would_work.nearest`), and on it the capacity search of
tuner/trial/capacity.py below the load asked (the config missed there, so that level is the
known break and is never measured again), at most `MAX_LEVELS` levels. Closed loop: users; open
loop: requests per second. A trace study has its own load question (its replay speed, said by
the trace sizing's hint) and a capacity study measured every config's load already: neither
searches here.

A search the machine's other load disturbed is taken again on the same server, as every
measurement is (tuner/trial/disturbance.py: up to 3 in all), and says so when it stays disturbed.
It is counted in the budget: it runs inside the run's wall time (a `--time-budget` counts it,
and it moves the budget's clock as a finished trial does, so a resumed study counts it too,
tuner/accounting.py), and when what is left of that budget is shorter than `estimate_s`,
nothing is launched: the record says how much time it needs, and the summary gives the command
(the same run with that `--time-budget`: a finished study resumes, measures no trial and runs
only this search). The record is kept in the study (`LOAD_ATTR`), so a resumed run does not
search twice; it keeps the launch's hardware-seconds by phase ("time_spent"), which the study's
time lines count as "load search" (study/time_spent.py).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from kvtune.study.outcome import TrialOutcome
from kvtune.study.what_would_work import LoadFound, nearest, resolved_targets
from kvtune.tuner import accounting
from kvtune.tuner.events import Callbacks
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.trial.capacity import CapacityPlan, is_open, lowest_load
from kvtune.tuner.trial.context import LoadSearch
from kvtune.tuner.trial.runner import TrialRunner

LOAD_ATTR = "load_search"  # the study's user attr: the search's record (results.json "load_search")
MAX_LEVELS = 6  # load levels measured at most, re-checks included: 8 users resolve to one user


def estimate_s(o: TrialOutcome) -> float | None:
    """What the search should take at most: one start-up and `MAX_LEVELS` levels, each about
    twice the config's own measurement at the load asked (a lower load sends at least as many
    requests, each alone faster, fewer at a time). None when the measurement's time is unknown."""
    measure_s = (o.metrics or {}).get("measure_s")
    if not isinstance(measure_s, (int, float)):
        return None
    return (o.startup_s or 0.0) + MAX_LEVELS * 2.0 * float(measure_s)


def search_load(
    runner: TrialRunner,
    records: TrialRecords,
    callbacks: Callbacks,
    run_dir: Any,
    time_budget_s: float | None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any] | None:
    """Search the load that holds for the nearest config and store the record in the study;
    returns it (None when there is nothing to search: a trace or capacity study, no config
    measured in full, or a record stored by an earlier run)."""
    study = records.study
    if LOAD_ATTR in study.user_attrs:
        return dict(study.user_attrs[LOAD_ATTR])
    spec, w = runner.what.spec, runner.what.spec.workload
    if w.trace is not None or spec.primary.name == "capacity":
        return None
    records.refresh()
    outcomes = records.outcomes()
    targets = [t for t in resolved_targets(runner.targets, outcomes) if not t.fidelity]
    near = nearest(outcomes, targets)
    if near is None or not targets:
        return None
    unit = "req/s" if is_open(w) else "users"
    asked = float(w.rate if is_open(w) and w.rate else w.concurrency)
    if asked <= lowest_load(w):  # the nearest missed at the lowest level there is: no load holds
        found = LoadFound(near.number, unit, asked, 0.0, asked, targets=", ".join(t.describe() for t in targets))
        return _store(records, {"load": found.to_dict()})
    need = estimate_s(near)
    left = None if time_budget_s is None else time_budget_s - accounting.elapsed_s(study)
    if left is not None and need is not None and need > left:
        callbacks.phase(near.number, f"load search not run: it needs about {need:.0f} s, {max(left, 0):.0f} s left")
        return {"needs_s": round(need + accounting.elapsed_s(study) + 60), "trial": near.number}  # not stored
    record = _measure(runner, records, callbacks, run_dir, near, targets, asked, unit, clock)
    accounting.tick_clock(study)  # the launch spent the time budget, as a trial does
    return _store(records, record)


def _measure(
    runner: TrialRunner,
    records: TrialRecords,
    callbacks: Callbacks,
    run_dir: Any,
    near: TrialOutcome,
    targets: list,
    asked: float,
    unit: str,
    clock: Callable[[], float],
) -> dict[str, Any]:
    """One fresh server of `near`, the capacity search below `asked` on it: the record, with the
    launch's hardware-seconds by phase."""
    callbacks.trial_started(near.number, near.candidate, near.baseline)
    callbacks.phase(near.number, f"load search: the most {unit} below {asked:g} at which the targets hold")
    began = clock()
    again, port = runner.new_outcome(near.number, near.candidate, near.baseline)
    runner.load_search = LoadSearch(CapacityPlan(ceiling=asked, max_levels=MAX_LEVELS), targets)
    try:
        folder = run_dir / "trials" / f"{near.number:04d}-load"
        runner.run(again, port, folder, records.measured_baseline(), early_stop=False)
    finally:
        runner.load_search = None
    m = again.metrics or {}
    levels = [{k: r.get(k) for k in ("load", "status", "recheck")} for r in again.load_levels]
    failed = "" if levels else (again.reason or "the server measured no level")
    found = LoadFound(
        near.number,
        unit,
        asked,
        float(m.get("capacity") or 0.0),
        lowest_load(runner.what.spec.workload),
        levels,
        bool(m.get("capacity_bounded")),
        round(clock() - began, 1),
        failed,
        again.disturbed,
        ", ".join(t.describe() for t in targets),
    )
    callbacks.phase(near.number, found.line(found.targets))
    return {"load": found.to_dict(), "time_spent": again.time_spent}


def _store(records: TrialRecords, record: dict[str, Any]) -> dict[str, Any]:
    records.study.set_user_attr(LOAD_ATTR, record)
    return record
