"""The confirmation phase: no config is named best on one measurement.

After the search, the top `confirm_top` configs and the baseline are measured again, each on a
fresh server and with a different prompt seed (so a config must hold under two prompt sets and
arrival orders, not a replay of the first). If the re-measured leaders regress, the ranking now
puts a config that was measured only once on top; the phase then walks down the ranking and
re-measures that one too, up to `EXTRA_REMEASUREMENTS` more, so the named best is a config
that held on a fresh server whenever the bound allows. A multi-objective study re-measures its
Pareto set instead (bounded), and its final Pareto set is computed from the confirmed figures
(`TrialOutcome.scores`). Results live in the study's user attrs,
so an interrupted confirmation resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kvtune.jsonsafe import to_jsonable
from kvtune.launchers.process import free_port
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import pareto, rank

if TYPE_CHECKING:
    from kvtune.tuner.loop import Tuner

EXTRA_REMEASUREMENTS = 3  # beyond confirm_top: how far down the ranking the walk may go
SEED_STEP = 7919  # the re-measurement's prompt seed = the study's + this (a different prompt set)


def first_choices(outcomes: list[TrialOutcome], tuner: "Tuner") -> list[TrialOutcome]:
    """The top `confirm_top` by their first measurement (for several objectives: the Pareto set
    by first measurements, at most `confirm_top + EXTRA_REMEASUREMENTS` of it), and the
    baseline when it ran."""
    objectives = tuner.spec.objective_specs
    if len(objectives) > 1:
        front = pareto(outcomes, [o.direction for o in objectives], values=lambda o: o.objectives)
        chosen = front[: tuner.spec.confirm_top + EXTRA_REMEASUREMENTS]
    else:
        chosen = rank(outcomes, tuner.spec.primary.direction, confirmed=False)[: tuner.spec.confirm_top]
    baseline = next((o for o in outcomes if o.baseline), None)
    if chosen and baseline is not None and baseline not in chosen and baseline.metrics:
        chosen.append(baseline)
    return chosen


def unconfirmed_leader(outcomes: list[TrialOutcome], tuner: "Tuner") -> TrialOutcome | None:
    """The config the ranking would name best now, when it was measured only once."""
    ranked = rank(outcomes, tuner.spec.primary.direction)
    return ranked[0] if ranked and ranked[0].confirmation is None else None


def confirm(tuner: "Tuner") -> dict:
    """Re-measure until the named best held on a fresh server (bounded). Returns the record."""
    done: dict = dict(tuner.study.user_attrs.get("confirmations", {}))
    for o in first_choices(tuner.outcomes(), tuner):
        if str(o.number) not in done:
            done[str(o.number)] = remeasure(tuner, o)
            tuner.study.set_user_attr("confirmations", to_jsonable(done))
    extra = 0
    while extra < EXTRA_REMEASUREMENTS and len(tuner.spec.objective_specs) == 1:
        leader = unconfirmed_leader(tuner.outcomes(), tuner)
        if leader is None:
            break
        tuner.cb.phase(leader.number, "the re-measured leaders regressed: confirming the next in line")
        done[str(leader.number)] = remeasure(tuner, leader)
        tuner.study.set_user_attr("confirmations", to_jsonable(done))
        extra += 1
    return done


def remeasure(tuner: "Tuner", o: TrialOutcome) -> dict:
    """One fresh launch of `o`'s config with another prompt seed; the record kept per trial."""
    tuner.cb.trial_started(o.number, o.candidate, o.baseline)
    tuner.cb.phase(o.number, "confirming: re-measuring with a fresh server and other prompts")
    port = free_port(tuner.host)
    again = TrialOutcome(number=o.number, candidate=o.candidate,
                         argv=tuner.launcher.command(o.candidate, port, tuner.host),
                         env=tuner.launcher.environment(o.candidate), baseline=o.baseline)
    workload = replace(tuner.spec.workload, seed=(tuner.spec.workload.seed + SEED_STEP) % 2**32)
    tuner.launch_and_measure(again, port, tuner.run_dir / "trials" / f"{o.number:04d}-confirm", workload)
    first = "-" if o.objective is None else f"{o.objective:.4g}"
    now = "-" if again.objective is None else f"{again.objective:.4g}"
    tuner.cb.phase(o.number, f"re-measured {tuner.spec.primary.name}: {now} (first {first})"
                   + ("" if again.feasible else f"; no longer feasible: {again.reason}"))
    return {"metrics": again.metrics, "objective": again.objective, "objectives": again.objectives,
            "feasible": again.feasible, "reason": again.reason, "seed": workload.seed}
