"""The one trial outcome: what a trial tried, what it measured, and why it failed if it did.

Every reader of a study uses this type: the tuner writes it into the Optuna trial, results.json
holds its `to_dict()`, and `kvtune show`, `report` and `export` read it back with `from_dict`, so
they cannot disagree on which trial is feasible, best or a Pareto point. A failure carries a
`FailureKind` for code and a reason for people; nothing parses the reason back.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate

# The constraint every trial carries: <= 0 when the server started and the benchmark completed.
RUNS_KEY = "server_ran"


@dataclass
class TrialOutcome:
    number: int
    candidate: Candidate
    argv: list[str]
    env: dict[str, str]
    baseline: bool = False
    launched: bool = False
    metrics: dict[str, float] | None = None
    constraints: dict[str, float] = field(default_factory=dict)
    failure: FailureKind | None = None  # None when feasible
    reason: str = ""  # for people; empty when feasible
    objective: float | None = None
    log_path: str | None = None
    startup_s: float | None = None  # launch to healthy, as kvtune measured it (the start that worked)
    # Where that time went as the server's log tells (launchers/startup_log.py): "total" (=
    # startup_s) and, where logged, "load", "compile", "graphs" in seconds; {} when not started.
    startup_split: dict[str, float] = field(default_factory=dict)
    duplicate_of: int | None = None
    spread: dict[str, float] = field(default_factory=dict)  # CV across repeats
    warm_start: str | None = None  # "study#n" when this config came from a warm start
    server_facts: dict[str, Any] = field(default_factory=dict)  # what the server logged about itself
    server_metrics: dict[str, Any] = field(default_factory=dict)  # its /metrics during the benchmark
    objectives: list[Any] = field(default_factory=list)  # every objective's value (multi-objective)
    # The re-measurements on fresh servers (tuner/remeasure.py `aggregate`): its "runs", and at its
    # top level the mean of the valid ones ("metrics", "objective", "objectives") and whether
    # they held ("feasible", "reason", "targets": the verdict's tests on them).
    confirmation: dict[str, Any] | None = None
    # The study's verdict (verdict/record.py `Verdict.to_dict`), on the trials it compared (the
    # candidate and the defaults): attached from the study like the confirmation, so it travels
    # in results.json's trials and every reader names what the run decided.
    verdict: dict[str, Any] | None = None
    load_levels: list[dict[str, Any]] = field(default_factory=list)  # capacity search: load -> met
    # The launch failure said nothing about the config (port clash, start-up timeout, memory still
    # held), even after one retry: a later proposal of the config is measured again, not copied.
    transient: bool = False
    # The worker slot's GPU pinning the server ran with (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER),
    # beside `env` (the candidate's own): bash/systemd exports carry it, containers do not.
    device_env: dict[str, str] = field(default_factory=dict)
    # The CPU set the server was pinned to (a worker slot's, sorted); None: every CPU kvtune had.
    # Container exports reserve that many CPUs (artifacts/cpu_resources.py).
    cpus: list[int] | None = None
    # The interference monitor's window over the measurement these figures are from (its worst
    # run: kvtune.interference.Interference.to_dict()); None when it was not watched.
    interference: dict[str, Any] | None = None
    # The windows of earlier measurements of this launch that were disturbed and replaced by a
    # re-measurement (their figures were dropped), oldest first.
    disturbed_attempts: list[dict[str, Any]] = field(default_factory=list)
    # The fidelity probe's record (tuner/trial/fidelity_check.py): its role (reference, floor,
    # probed, not probed), the figures against the defaults' answers, the flags that changed the
    # numerics, its seconds; the baseline's holds the reference answers. None: no gate.
    fidelity: dict[str, Any] | None = None
    # The hardware-seconds of this launch by phase, and whether its start-up hit the compile
    # cache (study/time_spent.py `TimeSpent.to_dict`); None: nothing launched (a pre-screen
    # rejection, a copied duplicate) or a record of an earlier version.
    time_spent: dict[str, Any] | None = None

    @property
    def disturbed(self) -> bool:
        """The figures were measured while the machine was busy with something else, even after
        the runner's re-measurements: they are no evidence for a verdict."""
        return bool((self.interference or {}).get("disturbed"))

    @property
    def feasible(self) -> bool:
        return bool(self.constraints) and all(v <= 0 for v in self.constraints.values())

    @property
    def measured(self) -> bool:
        """Benchmarked in its own right: has metrics and is not a replay of an earlier trial."""
        return self.duplicate_of is None and bool(self.metrics)

    @property
    def held(self) -> bool:
        """Not shown to fail on fresh servers (True until re-measured). The verdict's own target
        checks decide for the trial it tested (its candidate, the defaults); for any other
        re-measured trial, the confirmation record's judgement, the verdict's tests on its fresh
        runs (tuner/remeasure.py)."""
        if self.confirmation is None:
            return True
        proved = self._proof_checks()
        if proved:
            return not any(c.get("shown") == "missed" for c in proved)
        return bool(self.confirmation.get("feasible"))

    def _proof_checks(self) -> list[dict[str, Any]]:
        """The verdict's target checks of this trial's side (empty: the verdict did not test it)."""
        v = self.verdict or {}
        who = (
            "candidate" if v.get("candidate") == self.number else "defaults" if v.get("baseline") == self.number else ""
        )
        return [c for c in v.get("targets") or () if isinstance(c, dict) and c.get("who") == who] if who else []

    @property
    def fresh_objective(self) -> float | None:
        """The objective on fresh servers alone: the mean of the valid re-measurements (None when
        not re-measured, or when every re-measurement was disturbed). What decisions read; the
        first measurement (`objective`) is what the search saw, biased up for a config it chose."""
        again = self.confirmation or {}
        value = again.get("objective")
        if again.get("no_valid_run") or not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        return float(value)

    @property
    def fresh_objectives(self) -> list[float | None]:
        """Every objective on fresh servers alone (see `fresh_objective`; [] when there is none):
        the figures a multi-objective study's Pareto set is computed from."""
        again = self.confirmation or {}
        values = again.get("objectives") or []
        if again.get("no_valid_run") or len(values) != len(self.objectives):
            return []
        return [float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]

    @property
    def stopped_early(self) -> bool:
        """The measurement was cut once a target could no longer hold (objectives/early_stop.py):
        its figures rest on the few requests heard by then, never a full measurement."""
        return bool((self.metrics or {}).get("early_stopped"))

    @property
    def evidence(self) -> str:
        """How much the figures rest on: stopped early, measured once, or re-measured on a
        fresh server."""
        if self.confirmation is None and self.stopped_early:
            heard = (self.metrics or {}).get("num_requests")
            n = f" after {int(heard)} request(s)" if isinstance(heard, (int, float)) and math.isfinite(heard) else ""
            return f"stopped early{n}, not a full measurement"
        if self.confirmation is None:
            return "measured once"
        return "re-measured, held" if self.held else "re-measured, did not hold"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = self.evidence
        d["failure"] = self.failure.value if self.failure else None
        d["feasible"] = self.feasible
        d["disturbed"] = self.disturbed
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrialOutcome":
        """Read back `to_dict()` (also from results.json, where non-finite numbers are null)."""
        known = {f.name for f in fields(cls)}  # derived keys (feasible, evidence, disturbed) are recomputed
        values: dict[str, Any] = {k: v for k, v in d.items() if k in known}
        values["candidate"] = Candidate(**(d.get("candidate") or {}))
        values.setdefault("argv", [])
        values.setdefault("env", {})
        values["constraints"] = {k: (float("inf") if v is None else v) for k, v in (d.get("constraints") or {}).items()}
        if "failure" in d:
            values["failure"] = FailureKind(d["failure"]) if d["failure"] else None
        else:
            values["failure"] = _legacy_failure(d.get("reason") or "", values["constraints"])
        return cls(**values)


# Reading results.json files written before the kind was recorded (kvtune <= 0.1.0): their
# reasons began with these words. Only `from_dict` uses this, only for such files.
_LEGACY_PREFIXES = (
    ("pre-screen", FailureKind.PRE_SCREEN),
    ("server failed to start", FailureKind.START_FAILED),
    ("server start timed out", FailureKind.START_TIMEOUT),
    ("port busy", FailureKind.PORT_BUSY),
    ("server crashed during the benchmark", FailureKind.CRASHED),
)


def _legacy_failure(reason: str, constraints: dict[str, float]) -> FailureKind | None:
    """The failure kind of an old trial record, inferred once from its reason and constraints."""
    if not constraints or all(v <= 0 for v in constraints.values()):
        return None  # feasible
    for prefix, kind in _LEGACY_PREFIXES:
        if reason.startswith(prefix):
            return kind
    broken = [k for k, v in constraints.items() if k != RUNS_KEY and v > 0]
    if constraints.get(RUNS_KEY, 1.0) <= 0 and broken:
        return (
            FailureKind.REQUESTS_FAILED
            if any(k.startswith("error_rate") for k in broken)
            else FailureKind.TARGET_MISSED
        )
    return None  # a reason this version does not know
