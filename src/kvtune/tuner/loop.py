"""The ask -> pre-screen -> launch -> measure -> tell loop.

Every trial ends COMPLETE: a failed launch, a crash, a timeout or failed requests become a trial
whose constraints are violated (with the reason stored), never FAIL (samplers ignore FAIL trials
and would learn nothing) and never a fake good score. The baseline (the server's own defaults)
is always trial 0. A trial interrupted by Ctrl-C is marked FAIL/interrupted and re-queued, so the
next run of the study re-runs it; finished trials are never repeated.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import optuna

from kvtune.artifacts.results import to_jsonable
from kvtune.bench import client as bench_client
from kvtune.launchers.base import Candidate
from kvtune.launchers.process import (ServerProcess, ServerStartError, free_port, last_error_line,
                                      reap_leftovers)
from kvtune.objectives.targets import MAX_MARGIN, Target
from kvtune.tuner.space import SearchSpace
from kvtune.tuner.spec import StudySpec

RUNS_KEY = "server_ran"  # constraint: 0 when the server started and the benchmark completed
MAX_DUPLICATES_IN_A_ROW = 25


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
    reason: str = ""  # empty when feasible
    objective: float | None = None
    log_path: str | None = None
    startup_s: float | None = None
    duplicate_of: int | None = None

    @property
    def feasible(self) -> bool:
        return bool(self.constraints) and all(v <= 0 for v in self.constraints.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d["feasible"] = self.feasible
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrialOutcome":
        d = {k: v for k, v in d.items() if k != "feasible"}
        d["candidate"] = Candidate(**d["candidate"])
        return cls(**d)


@dataclass
class Callbacks:
    """How the loop reports progress; the CLI prints, tests collect."""

    trial_started: Callable[[int, Candidate, bool], None] = lambda n, c, b: None
    phase: Callable[[int, str], None] = lambda n, p: None
    trial_finished: Callable[[TrialOutcome], None] = lambda o: None


class Tuner:
    """Runs one study. Parts are injected: the launcher (real or fake), the bench function,
    the storage URL (SQLite file or in-memory for tests)."""

    def __init__(self, spec: StudySpec, launcher: Any, space: SearchSpace, targets: list[Target],
                 study: optuna.Study, run_dir: Path, callbacks: Callbacks | None = None,
                 bench: Callable[..., Any] = bench_client.run, host: str = "127.0.0.1"):
        self.spec = spec
        self.launcher = launcher
        self.space = space
        self.targets = targets
        self.study = study
        self.run_dir = run_dir
        self.cb = callbacks or Callbacks()
        self.bench = bench
        self.host = host

    # ---- bookkeeping over the stored trials -------------------------------------------------
    def outcomes(self) -> list[TrialOutcome]:
        out = []
        for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if "outcome" in t.user_attrs:
                out.append(TrialOutcome.from_dict(t.user_attrs["outcome"]))
        return sorted(out, key=lambda o: o.number)

    def _requeue_interrupted(self) -> None:
        """Trials left RUNNING by a killed kvtune, or FAIL/interrupted by Ctrl-C, are re-queued
        once with the same parameters so the study re-runs them."""
        requeued = set(self.study.user_attrs.get("requeued", []))
        changed = False
        for t in self.study.get_trials(deepcopy=False):
            stale = t.state == optuna.trial.TrialState.RUNNING
            interrupted = t.state == optuna.trial.TrialState.FAIL and t.user_attrs.get("interrupted")
            if (stale or interrupted) and t.number not in requeued:
                if stale:
                    self.study.tell(t.number, state=optuna.trial.TrialState.FAIL)
                if not t.user_attrs.get("baseline") and t.params:
                    self.study.enqueue_trial(t.params, skip_if_exists=False)
                requeued.add(t.number)
                changed = True
        if changed:
            self.study.set_user_attr("requeued", sorted(requeued))

    def _completed(self) -> int:
        return len(self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))

    # ---- the loop -----------------------------------------------------------------------------
    @property
    def pid_file(self) -> Path:
        return self.run_dir / "server.pid.json"

    def run(self) -> list[TrialOutcome]:
        note = reap_leftovers(self.pid_file)
        if note:
            self.cb.phase(-1, note)
        self._requeue_interrupted()
        duplicates = 0
        while self._completed() < self.spec.trials:
            has_baseline = any(o.baseline for o in self.outcomes())
            outcome = self.run_one(baseline=not has_baseline)
            duplicates = duplicates + 1 if outcome.duplicate_of is not None else 0
            if duplicates >= MAX_DUPLICATES_IN_A_ROW:
                break  # the sampler keeps proposing measured configs: the space is exhausted
        return self.outcomes()

    def run_one(self, baseline: bool = False) -> TrialOutcome:
        trial = self.study.ask()
        try:
            if baseline:
                trial.set_user_attr("baseline", True)
                candidate = Candidate()
            else:
                candidate = self.space.suggest(trial)
            outcome = self._evaluate(trial, candidate, baseline)
        except KeyboardInterrupt:
            trial.set_user_attr("interrupted", True)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        self._tell(trial, outcome)
        self.cb.trial_finished(outcome)
        return outcome

    def _evaluate(self, trial: optuna.trial.Trial, candidate: Candidate, baseline: bool) -> TrialOutcome:
        n = trial.number
        port = free_port(self.host)
        argv = self.launcher.command(candidate, port, self.host)
        env = self.launcher.environment(candidate)
        outcome = TrialOutcome(number=n, candidate=candidate, argv=argv, env=env, baseline=baseline)
        self.cb.trial_started(n, candidate, baseline)

        same = self._find_measured(candidate)
        if same is not None:
            outcome.duplicate_of = same.number
            outcome.metrics, outcome.reason = same.metrics, same.reason
            outcome.constraints, outcome.objective = dict(same.constraints), same.objective
            outcome.argv, outcome.env = same.argv, same.env
            return outcome

        reason = self.launcher.precheck(candidate, self.spec.workload)
        if reason:
            return self._infeasible(outcome, f"pre-screen: {reason}")

        trial_dir = self.run_dir / "trials" / f"{n:04d}"
        trial_dir.mkdir(parents=True, exist_ok=True)
        outcome.log_path = str(trial_dir / "server.log")
        server = ServerProcess(argv=argv, env=env, log_path=Path(outcome.log_path), port=port,
                               host=self.host, health_path=self.launcher.health_path,
                               pid_file=self.pid_file)
        self.cb.phase(n, "starting server")
        try:
            server.start()
            outcome.launched = True
            outcome.startup_s = server.wait_ready(self.spec.startup_timeout_s)
            run = self.bench(server.base_url, self.spec.workload, self.launcher.served_model_name(),
                             extra_body=self.launcher.request_extra_body(),
                             on_phase=lambda p: self.cb.phase(n, p))
            died = not server.alive()
        except ServerStartError as e:
            label = {"crash": "server failed to start", "timeout": "server start timed out",
                     "port": "port busy"}[e.kind]
            return self._infeasible(outcome, f"{label}: {e.reason}")
        finally:
            server.stop()
        (trial_dir / "bench.json").write_text(json.dumps(to_jsonable(run.to_dict()), indent=1))
        outcome.metrics = run.metrics
        self._score(outcome)
        if died:
            rc = server.proc.returncode if server.proc else None
            reason = f"server crashed during the benchmark (status {rc}): {last_error_line(server.log_text())}"
            return self._infeasible(outcome, reason, keep_metrics=True)
        return outcome

    def _find_measured(self, candidate: Candidate) -> TrialOutcome | None:
        for o in self.outcomes():
            if o.duplicate_of is None and o.candidate == candidate and not o.baseline:
                return o
        return None

    def _score(self, outcome: TrialOutcome) -> None:
        m = outcome.metrics or {}
        outcome.constraints = {t.name: t.margin(m) for t in self.targets}
        outcome.constraints[RUNS_KEY] = -1.0
        value = m.get(self.spec.objective_key)
        outcome.objective = None if value is None or not math.isfinite(value) else float(value)
        broken = [t for t in self.targets if not t.met(m)]
        if broken:
            outcome.reason = "; ".join(_describe_miss(t, m) for t in broken)

    def _infeasible(self, outcome: TrialOutcome, reason: str, keep_metrics: bool = False) -> TrialOutcome:
        if not keep_metrics:
            outcome.metrics = None
        outcome.constraints = {t.name: MAX_MARGIN for t in self.targets}
        outcome.constraints[RUNS_KEY] = 1.0
        outcome.reason = reason
        if not keep_metrics:
            outcome.objective = None
        return outcome

    def _tell(self, trial: optuna.trial.Trial, outcome: TrialOutcome) -> None:
        for key, value in outcome.constraints.items():
            trial.set_constraint(key, value)
        trial.set_user_attr("outcome", json.loads(json.dumps(outcome.to_dict(), default=_json_default)))
        # Infeasible trials still need a value; the worst possible one, so no sampler (or
        # reader of the raw study) mistakes a crash for a good result.
        value = outcome.objective
        if value is None or (not outcome.feasible and outcome.metrics is None):
            value = 0.0 if self.spec.direction == "maximize" else 1e12
        self.study.tell(trial, value)


def _describe_miss(t: Target, metrics: dict[str, float]) -> str:
    v = t.value(metrics)
    if math.isinf(v):
        shown = "inf (requests failed)"
    elif t.metric == "error_rate":
        shown = f"{v * 100:.1f}%"
    elif t.key.endswith("_ms"):
        shown = f"{v:.0f} ms"
    else:
        shown = f"{v:.1f}"
    return f"{t.name} {shown} breaks {t.text or t.describe()}"


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)
