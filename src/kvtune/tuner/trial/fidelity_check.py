"""The fidelity gate on one trial: the reference answers on the baseline, the comparison elsewhere.

A study whose targets hold a `kld` bound (added by default when its space can change the
model's numerics, tuner/assemble.py) asks the reference prompts of the trial's own server after its
measurement, before it stops (no extra launch):
- the baseline's first measurement records the defaults' answers: the reference, kept in its
  outcome (`TrialOutcome.fidelity["reference"]`), so every worker and every later run reads it;
- a later run of the defaults on a fresh server is compared with it: the A/A, the floor;
- a config whose flags change the numerics (`Launcher.numerics_changed`) is compared with it;
- any other config changes only speed: it is not probed and stands at the floor (KL 0).
A probe that fails, or a reference that is missing, gives an infinite KL: the config is refused,
never passed unseen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from kvtune.bench.fidelity_probe import ProbeFailed, ProbePlan, answers_from_json, answers_to_json
from kvtune.clock import Clock
from kvtune.launchers.base import Launcher
from kvtune.objectives.fidelity import UNPROBED, Answer, Fidelity, fidelity
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome

# (base_url, served model name, plan, extra request fields) -> one answer per prompt
AskAnswers = Callable[[str, str, ProbePlan, Mapping[str, Any]], Sequence[Answer]]

REFERENCE, FLOOR, PROBED, NOT_PROBED = "reference", "floor", "probed", "not probed"


def gated(targets: Sequence[Target]) -> bool:
    return any(t.fidelity for t in targets)


def reference_of(baseline: TrialOutcome | None) -> list[Answer] | None:
    """The defaults' answers the baseline recorded (None: it recorded none)."""
    ref = ((baseline.fidelity or {}) if baseline is not None else {}).get("reference")
    return answers_from_json(ref) if ref else None


@dataclass
class FidelityCheck:
    """Probes one trial's running server as the rules above say; `ask` is the HTTP probe
    (bench/fidelity_probe.py `ask_answers`, or a test's fake) and `clock` times it."""

    launcher: Launcher
    plan: ProbePlan
    ask: AskAnswers
    clock: Clock

    def probe(self, base_url: str, outcome: TrialOutcome, baseline: TrialOutcome | None) -> dict[str, Any]:
        """The trial's fidelity record: its role, the figures (`Fidelity.to_dict`), what changed
        the numerics, the seconds the probe took, the reference answers on the baseline."""
        changed = list(self.launcher.numerics_changed(outcome.candidate.flags))
        reference = reference_of(baseline)
        if outcome.baseline and reference is None:
            role = REFERENCE
        elif outcome.baseline:
            role = FLOOR
        elif changed:
            role = PROBED
        else:
            return {"role": NOT_PROBED, **UNPROBED.to_dict(), "changed": [], "seconds": 0.0}
        start = self.clock.monotonic()
        try:
            answers = list(self.ask(base_url, self.launcher.served_model_name(), self.plan, probe_body(self.launcher)))
        except ProbeFailed as e:
            return self._failed(role, changed, str(e), self.clock.monotonic() - start)
        seconds = self.clock.monotonic() - start
        if role == REFERENCE:
            same = fidelity(answers, answers)
            return {
                "role": role,
                **same.to_dict(),
                "changed": [],
                "seconds": seconds,
                "reference": answers_to_json(answers),
            }
        if reference is None or len(reference) != len(answers):
            return self._failed(role, changed, "the baseline recorded no reference answers to compare with", seconds)
        return {"role": role, **fidelity(reference, answers).to_dict(), "changed": changed, "seconds": seconds}

    def _failed(self, role: str, changed: list[str], why: str, seconds: float) -> dict[str, Any]:
        nothing = Fidelity(len(self.plan.prompts), math.inf, math.inf, 0.0, 0.0, None)
        return {"role": role, **nothing.to_dict(), "changed": changed, "seconds": seconds, "failed": why}


def probe_body(launcher: Launcher) -> dict[str, Any]:
    """The launcher's request fields, with llama-server's prompt cache on: the prompts share the
    chat template's opening, computed once per server (a fifth of the probe's time on the demo;
    the answers are the same as with it off, docs/fidelity.md). The measurement keeps it off."""
    body = dict(launcher.request_extra_body())
    if "cache_prompt" in body:
        body["cache_prompt"] = True
    return body


def fidelity_metrics(record: Mapping[str, Any] | None) -> dict[str, float]:
    """The figures a trial's metrics carry from its fidelity record (none without one)."""
    if not record:
        return {}
    return Fidelity.from_dict(record).metrics()


def fidelity_line(record: Mapping[str, Any] | None) -> str:
    """One line for people: what the probe found, or why it found nothing."""
    if not record:
        return ""
    if record.get("failed"):
        return f"fidelity not measured: {record['failed']}"
    role = record.get("role")
    if role == REFERENCE:
        return f"fidelity: recorded the defaults' answers to {record.get('prompts')} reference prompts"
    text = Fidelity.from_dict(record).describe()
    if role == FLOOR:
        return f"fidelity floor (the defaults on a fresh server): {text}"
    changed = record.get("changed") or []
    return f"fidelity ({', '.join(changed)}): {text}" if changed else f"fidelity: {text}"
