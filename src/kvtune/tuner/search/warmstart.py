"""Warm start: begin a study on new hardware from what worked on other hardware.

The best few feasible configs of the source study are adapted to the new search space (a value
outside a range is clamped into it; a choice the new space does not offer is left to the sampler)
and queued as the first trials after the baseline. The summary says whether they held. A
multi-objective source is ranked by its first objective (the one its launch script took).
They are queued in compile order (launchers/compile_cache.py `in_compile_order`): configs whose
vLLM compiled graphs are the same run one after another, after the trials queued before them,
so a GPU study pays one compile per key instead of one per switch.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import optuna

from kvtune.kinds import Direction
from kvtune.knobs import Knob
from kvtune.launchers.compile_cache import in_compile_order
from kvtune.study.outcome import TrialOutcome
from kvtune.study.ranking import rank
from kvtune.tuner.store.storage import queued_params


def adapt(params: dict[str, Any], knobs: list[Knob]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in knobs:
        if k.name not in params or k.kind == "fixed":
            continue
        v = params[k.name]
        if k.kind == "choices":
            if v in k.choices:
                out[k.name] = v
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            v = min(max(v, k.bounds[0]), k.bounds[1])
            out[k.name] = int(round(v)) if k.kind == "int" else float(v)
    return out


CompileKey = Callable[[Mapping[str, Any]], "str | None"]  # a config's params -> its compile key


def enqueue_warm_start(
    study: optuna.Study,
    source: optuna.Study,
    knobs: list[Knob],
    top: int = 3,
    compile_key: CompileKey = lambda params: None,
) -> list[str]:
    """Queue the source's best `top` feasible configs (once per study), those that share a
    `compile_key` together, the key of the trial queued last leading. Returns their labels."""
    if study.user_attrs.get("warm_started_from"):
        return []
    outcomes = [
        TrialOutcome.from_dict(t.user_attrs["outcome"])
        for t in source.trials
        if t.state == optuna.trial.TrialState.COMPLETE and "outcome" in t.user_attrs
    ]
    by_number = {t.number: t for t in source.trials}
    # `source.direction` raises for a multi-objective study: rank by its first objective
    first = source.directions[0]
    direction = Direction.MAXIMIZE if first == optuna.study.StudyDirection.MAXIMIZE else Direction.MINIMIZE
    chosen: list[tuple[dict[str, Any], str]] = []
    for o in rank(outcomes, direction, confirmed=False):
        if o.baseline:
            continue
        params = adapt(by_number[o.number].params, knobs)
        if not params or params in [p for p, _ in chosen]:
            continue
        chosen.append((params, f"{source.study_name}#{o.number}"))
        if len(chosen) >= top:
            break
    queued = queued_params(study)
    last = compile_key(queued[-1]) if queued else None
    for params, label in in_compile_order(chosen, lambda c: compile_key(c[0]), first=last):
        study.enqueue_trial(params, user_attrs={"warm_start": label})
    study.set_user_attr("warm_started_from", source.study_name)
    return [label for _, label in chosen]
