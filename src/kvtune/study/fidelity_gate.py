"""What the fidelity gate did in a study, read from its trial outcomes: the gate's state, the
configs it refused (with what they would have gained), and the floor the defaults' own fresh
runs showed. Every surface (summary, results.json, `kvtune show`, the CSV, the report) reads
these, so they say the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kvtune.errors import TargetError
from kvtune.objectives.fidelity import Fidelity
from kvtune.objectives.targets import FIDELITY_METRICS, Target, parse_target
from kvtune.study.outcome import TrialOutcome

ON, OFF, NOT_NEEDED = "on", "off", "not needed"


@dataclass(frozen=True)
class Refusal:
    """A measured config whose answers broke the gate; `gain`: its objective against the
    baseline's first measurement (a fraction; None without both figures)."""

    outcome: TrialOutcome
    fidelity: Fidelity
    changed: tuple[str, ...]
    gain: float | None
    objective: str

    def line(self, floor: Fidelity | None = None) -> str:
        """``trial 5 (cache-type-k=q4_0, cache-type-v=q4_0): +9% output throughput, 12% of tokens
        agree with the defaults' (floor 100%; KLD 0.081, 95% upper bound 0.11): refused``;
        `floor`: the defaults' own fresh runs, when the study measured them."""
        flags = self.outcome.candidate.flags
        what = ", ".join(f"{k}={flags.get(k)}" for k in self.changed) or "its flags"
        gain = "" if self.gain is None else f"{self.gain * 100:+.0f}% {self.objective.replace('_', ' ')}, "
        f = self.fidelity
        if math.isinf(f.kld_upper):
            return f"trial {self.outcome.number} ({what}): {gain}fidelity not measured: refused"
        base = "" if floor is None else f"floor {floor.agreement * 100:.0f}%; "
        return (
            f"trial {self.outcome.number} ({what}): {gain}{f.agreement * 100:.0f}% of tokens agree with the "
            f"defaults' ({base}KLD {f.kld:.3g}, 95% upper bound {f.kld_upper:.3g}): refused"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial": self.outcome.number,
            "changed": list(self.changed),
            "gain": self.gain,
            **{k: v for k, v in self.fidelity.to_dict().items() if k != "method"},
        }


@dataclass(frozen=True)
class GateReport:
    state: str  # ON, OFF (turned off), NOT_NEEDED (no flag in the space changes the numerics)
    target: Target | None
    refused: tuple[Refusal, ...]
    probed: int  # configs probed (the reference and the floor runs apart)
    floor: Fidelity | None  # the defaults on fresh servers against their first answers

    def lines(self) -> list[str]:
        """The summary's lines about the gate."""
        if self.state == OFF:
            return ["fidelity gate: off (fidelity_gate: false): configs were judged on speed alone"]
        if self.state == NOT_NEEDED or self.target is None:
            return ["fidelity gate: not needed (no flag in the space changes the model's numerics)"]
        floor = "" if self.floor is None else f"; floor (the defaults on fresh servers): {self.floor.describe()}"
        head = (
            f"fidelity gate: {self.target.text} (KL divergence from the defaults' answers, 95% upper bound); "
            f"{self.probed} config(s) probed, {len(self.refused)} refused{floor}"
        )
        return [head, *(f"  {r.line(self.floor)}" for r in self.refused)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "target": None if self.target is None else self.target.text,
            "probed": self.probed,
            "refused": [r.to_dict() for r in self.refused],
            "floor": None if self.floor is None else self.floor.to_dict(),
        }


def recorded_gate(outcomes: Sequence[TrialOutcome]) -> Target | None:
    """The fidelity target the trials were judged by, read from their constraints (a study read
    back from results.json or storage, whose target texts are for people)."""
    for o in outcomes:
        for key in o.constraints:
            if key.startswith(FIDELITY_METRICS):
                try:
                    return parse_target(key)
                except TargetError:
                    return None
    return None


def gate_report(
    outcomes: Sequence[TrialOutcome],
    targets: Sequence[Target] | None,
    spec: Mapping[str, Any],
    objective_key: str,
) -> GateReport:
    """The gate as this study ran it (`spec`: the stored spec, for `fidelity_gate`; `targets`
    None: read from the trials' constraints)."""
    target = recorded_gate(outcomes) if targets is None else next((t for t in targets if t.fidelity), None)
    if target is None:
        return GateReport(OFF if spec.get("fidelity_gate") is False else NOT_NEEDED, None, (), 0, None)
    baseline = next((o for o in outcomes if o.baseline and o.duplicate_of is None), None)
    base_value = _positive((baseline.metrics or {}).get(objective_key)) if baseline else None
    probed = [o for o in outcomes if o.duplicate_of is None and (o.fidelity or {}).get("role") == "probed"]
    refused = []
    for o in probed:
        if o.constraints.get(target.constraint_key, 0.0) <= 0:
            continue
        value = _positive((o.metrics or {}).get(objective_key))
        gain = value / base_value - 1 if value is not None and base_value is not None else None
        fid = Fidelity.from_dict(o.fidelity or {})
        refused.append(Refusal(o, fid, tuple((o.fidelity or {}).get("changed") or ()), gain, objective_key))
    return GateReport(ON, target, tuple(refused), len(probed), floor_of(baseline))


def floor_of(baseline: TrialOutcome | None) -> Fidelity | None:
    """The worst A/A of the defaults' fresh runs (None: none was probed)."""
    runs = ((baseline.confirmation or {}).get("runs") or []) if baseline else []
    seen = [Fidelity.from_dict(r["fidelity"]) for r in runs if (r.get("fidelity") or {}).get("role") == "floor"]
    return max(seen, key=lambda f: f.kld_upper) if seen else None


def _positive(v: Any) -> float | None:
    """`v` when it is a positive finite number (a gain can be taken against it), else None."""
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None
