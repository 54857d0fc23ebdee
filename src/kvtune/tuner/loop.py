"""The ask -> pre-screen -> launch -> measure -> tell loop.

Every trial ends COMPLETE: a failed launch, a crash, a timeout or failed requests become a trial
whose constraints are violated (with the reason stored), never FAIL (samplers ignore FAIL trials
and would learn nothing) and never a fake good score. The baseline (the server's own defaults)
is queued first when the study is created. A trial interrupted by Ctrl-C, or lost with its
worker, is failed and queued again, so the study re-runs it; finished trials are never repeated.
A measurement stops the moment a target can no longer hold (tuner/stopping.py): the trial is then
infeasible like any other miss. The budget counts launched configs, not asks (tuner/accounting.py).
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Callable

import optuna

from kvtune.bench import client as bench_client
from kvtune.bench.client import BenchOptions, slo_goodput
from kvtune.bench.tokenizer import try_load_tokenizer
from kvtune.workload import Workload
from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import Direction, FailureKind
from kvtune.launchers.base import Candidate, Launcher
from kvtune.launchers.process import (ServerProcess, free_port, last_error_line, process_start_ticks,
                                      reap_leftovers)
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.fleet.budget import Budget, StopReason
from kvtune.tuner.trial.launch_retry import LaunchFailed, Starter
from kvtune.energy import Meter, open_meter
from kvtune.tuner.trial.measure import Measurement, MeteredBench, account, measure_capacity, measure_repeats
from kvtune.tuner.trial.memory_wait import MemoryWait, read_memory, visible_gpus
from kvtune.tuner.search.space import SearchSpace
from kvtune.study.spec import StudySpec
from kvtune.tuner.trial.stopping import watched_targets
from kvtune.tuner.fleet import accounting
from kvtune.tuner.fleet import recovery
from kvtune.tuner.trial import scoring
from kvtune.tuner.fleet import storage

MAX_DUPLICATES_IN_A_ROW = 25


@dataclass
class Callbacks:
    """How the loop reports progress; the CLI prints, tests collect."""

    trial_started: Callable[[int, Candidate, bool], None] = lambda n, c, b: None
    phase: Callable[[int, str], None] = lambda n, p: None
    trial_finished: Callable[[TrialOutcome], None] = lambda o: None


class Tuner:
    """Runs one study. Parts are injected: the launcher (real or fake), the bench function,
    the storage URL (SQLite file or in-memory for tests)."""

    def __init__(self, spec: StudySpec, launcher: Launcher, space: SearchSpace, targets: list[Target],
                 study: optuna.Study, run_dir: Path, callbacks: Callbacks | None = None,
                 bench: Callable[..., Any] = bench_client.run, host: str = "127.0.0.1",
                 slot: int = 0, cpus: set[int] | None = None, hardware: dict | None = None,
                 wait_for_others: bool = True, device_env: dict[str, str] | None = None):
        self.spec = spec
        self.launcher = launcher
        self.space = space
        self.targets = targets
        self.study = study
        self.run_dir = run_dir
        self.cb = callbacks or Callbacks()
        self.bench = bench
        self.host = host
        # Who runs trials here: recorded on each trial so a dead worker's trial is recognised.
        self.worker = {"host": os.environ.get("KVTUNE_WORKER_HOST") or socket.gethostname(), "pid": os.getpid(),
                       "start_ticks": process_start_ticks(os.getpid()), "slot": slot,
                       "cpus": sorted(cpus) if cpus else None}
        self.cpus = cpus  # this worker's CPU set; its servers are pinned to it
        # Whether run() waits for trials running elsewhere (the process that summarizes does;
        # an extra worker leaves when nothing is left to ask).
        self.wait_for_others = wait_for_others
        self.hardware = hardware or {}
        # Set on this worker's servers only (e.g. CUDA_VISIBLE_DEVICES of its GPU slot).
        self.device_env: dict[str, str] = dict(device_env or {})
        # The model's own tokenizer (GGUF vocab or HF) makes synthetic prompts exact; loaded
        # once per study, None when unavailable (prompts are then a stated approximation).
        self.tokenizer = _study_tokenizer(launcher)
        # Early stops of the measurements in flight, by trial number (run_one records them), and
        # why the last run() stopped asking (results.json's "budget").
        self._stopped: dict[int, str] = {}
        self.budget_report: dict | None = None
        latency = {t.metric: t.threshold for t in targets
                   if t.upper and not t.relative and t.metric in ("ttft", "tpot", "e2el")}
        self._goodput = slo_goodput(latency) if latency else None

    # ---- bookkeeping over the stored trials -------------------------------------------------
    def outcomes(self) -> list[TrialOutcome]:
        confirmations = self.study.user_attrs.get("confirmations", {})
        out = []
        for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if "outcome" in t.user_attrs:
                o = TrialOutcome.from_dict(t.user_attrs["outcome"])
                o.confirmation = confirmations.get(str(o.number))
                out.append(o)
        return sorted(out, key=lambda o: o.number)

    def _recover(self) -> None:
        """Re-queue trials whose worker is gone (see tuner/recovery.py)."""
        recovery.recover(self.study, self.run_dir, str(self.worker["host"]))

    def _requeue(self, t: Any) -> None:
        recovery.requeue(self.study, t)

    def _running_elsewhere(self, trial: optuna.trial.Trial) -> bool:
        return recovery.running_elsewhere(self.study, trial)

    def _surplus(self, trial: optuna.trial.Trial) -> bool:
        """Workers that ask at the same moment can overshoot the budget; the lowest-numbered
        running trials keep their places and the others step back (never a queued trial)."""
        if storage.was_enqueued(self.study, trial):
            return False
        trials = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        # the budget counts measured configs only (see tuner/accounting.py), as run() does
        free = accounting.load_budget(self.study, self._spec_budget()).trials - self._counts().measured
        running = sorted(t.number for t in trials)
        return trial.number not in running[:max(free, 0)]

    def _counts(self) -> accounting.Spent:
        return accounting.spent(self.study)

    def completed(self) -> int:
        """Configs measured so far: what --trials counts (pre-screen rejections and duplicates
        are free)."""
        return self._counts().measured

    def _tried_all(self) -> bool:
        """Every candidate of a finite space has a finished trial of its own (measured or
        rejected before launch): asking more could only give duplicates. A trial that failed
        transiently does not count: its config is to be measured again."""
        size = self.space.size()
        if size is None:
            return False
        done = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))

        def settled(t: optuna.trial.FrozenTrial) -> bool:
            outcome = t.user_attrs.get("outcome") or {}
            return outcome.get("duplicate_of") is None and not outcome.get("transient")

        tried = [t for t in done if not t.user_attrs.get("baseline") and settled(t)]
        return len(tried) >= size

    def _spec_budget(self) -> Budget:
        return Budget(self.spec.trials, self.spec.time_budget_s)

    # ---- the loop -----------------------------------------------------------------------------
    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"server.pid.{self.worker['slot']}.json"

    def run(self) -> list[TrialOutcome]:
        """Ask, measure and tell until the budget is spent (tuner/budget.py): --trials configs
        measured, or the time budget spent, or the asks cap reached. The process that summarizes
        (`wait_for_others`) stores the budget and starts the clock in the study, so workers and
        a resumed study count the same way; `budget_report` says why it stopped."""
        for f in sorted(self.run_dir.glob("server.pid*.json")):
            note = reap_leftovers(f)
            if note:
                self.cb.phase(-1, note)
        self._recover()
        if self.wait_for_others:
            accounting.store_budget(self.study, self._spec_budget())
            accounting.begin_clock(self.study)
        budget = accounting.load_budget(self.study, self._spec_budget())
        duplicates = 0
        stop: StopReason | str | None = None
        while True:
            c = self._counts()
            stop = budget.stop_reason(c.measured, c.asked, accounting.elapsed_s(self.study))
            if stop is StopReason.TRIALS:
                break
            if stop is not None:  # time or asks: trials running elsewhere still finish
                if c.running and self.wait_for_others:
                    time.sleep(1.0)
                    self._recover()
                    continue
                break
            if c.waiting == 0 and self._tried_all():
                stop = accounting.EXHAUSTED  # every config of the space was tried: nothing to ask
                break
            if c.waiting == 0 and c.measured + c.running >= budget.trials:
                if not self.wait_for_others:
                    break  # the rest of the budget is running on other workers
                time.sleep(1.0)  # until they finish, or turn out dead and are re-queued
                self._recover()
                continue
            outcome = self.run_one()
            if outcome is None:  # another worker took the last trial, or runs this config now
                time.sleep(0.5)
                continue
            duplicates = duplicates + 1 if outcome.duplicate_of is not None else 0
            if duplicates >= MAX_DUPLICATES_IN_A_ROW:
                stop = accounting.EXHAUSTED  # the sampler keeps proposing measured configs
                break
            self._recover()
        outcomes = self.outcomes()
        used, elapsed = self._counts(), accounting.elapsed_s(self.study)
        culprits = accounting.blame(outcomes, self.launcher, self.spec.workload) \
            if stop is StopReason.ASKS else []
        message = accounting.stop_message(stop, budget, used, elapsed, culprits) if stop else ""
        self.budget_report = accounting.report(stop, budget, used, elapsed, message)
        return outcomes

    def run_one(self) -> TrialOutcome | None:
        with warnings.catch_warnings():  # ask/tell with heartbeats is what we mean to do
            warnings.filterwarnings("ignore", message="Heartbeat of storage")
            trial = self.study.ask()
        if self._surplus(trial):
            trial.set_user_attr("surplus", True)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return None
        baseline = bool(trial.user_attrs.get("baseline"))
        trial.set_user_attr("worker", self.worker)
        trial.set_user_attr("hardware", self.hardware)
        try:
            with storage.heartbeat(self.study, trial):
                candidate = Candidate() if baseline else self.space.suggest(trial)
                if not baseline and self._running_elsewhere(trial):
                    trial.set_user_attr("in_flight_elsewhere", True)
                    self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    return None
                outcome = self._evaluate(trial, candidate, baseline)
        except KeyboardInterrupt:
            trial.set_user_attr("interrupted", True)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self._requeue(storage.frozen(self.study, trial))
            raise
        stopped = self._stopped.pop(trial.number, None)
        if stopped and outcome.duplicate_of is None:
            self._stopped_early(outcome, stopped)
        self._tell(trial, outcome)
        accounting.tick_clock(self.study)
        self.cb.trial_finished(outcome)
        return outcome

    def _stopped_early(self, outcome: TrialOutcome, reason: str) -> None:
        """The measurement was cut because a target could no longer hold: the trial is
        infeasible (COMPLETE with its violated constraints, so the sampler learns) and says why.
        A crash found after the stop keeps its own reason."""
        if outcome.failure is FailureKind.CRASHED:
            return
        if outcome.feasible:  # cannot happen (the partial figures miss too): never let it pass
            self._infeasible(outcome, FailureKind.TARGET_MISSED, reason, keep_metrics=True)
            return
        outcome.reason = reason

    def _evaluate(self, trial: optuna.trial.Trial, candidate: Candidate, baseline: bool) -> TrialOutcome:
        n = trial.number
        port = free_port(self.host)
        argv = self.launcher.command(candidate, port, self.host)
        env = self.launcher.environment(candidate)
        outcome = TrialOutcome(number=n, candidate=candidate, argv=argv, env=env, baseline=baseline,
                               warm_start=trial.user_attrs.get("warm_start"), device_env=dict(self.device_env))
        self.cb.trial_started(n, candidate, baseline)

        same = self._find_measured(candidate)
        if same is not None:
            outcome.duplicate_of = same.number
            outcome.metrics, outcome.reason, outcome.failure = same.metrics, same.reason, same.failure
            outcome.constraints, outcome.objective = dict(same.constraints), same.objective
            outcome.objectives = list(same.objectives)
            outcome.argv, outcome.env, outcome.device_env = same.argv, same.env, dict(same.device_env)
            return outcome

        reason = self.launcher.precheck(candidate, self.spec.workload)
        if reason:
            return self._infeasible(outcome, FailureKind.PRE_SCREEN, f"pre-screen: {reason}")

        return self.launch_and_measure(outcome, port, self.run_dir / "trials" / f"{n:04d}")

    def launch_and_measure(self, outcome: TrialOutcome, port: int, trial_dir: Path,
                           workload: Workload | None = None) -> TrialOutcome:
        """Start the server of `outcome.argv`, measure it under `workload` (the study's unless
        given: the confirmation re-measures with other prompts), stop it; fill in and score."""
        n = outcome.number
        trial_dir.mkdir(parents=True, exist_ok=True)
        self.cb.phase(n, "starting server")
        try:  # waits for the previous server's memory; retries a transient failure once
            server = self._starter(n).start(outcome, port, trial_dir)
        except LaunchFailed as e:
            outcome.transient = e.transient
            return self._infeasible(outcome, e.kind, e.reason)
        try:
            measured = self._measure(n, server.base_url, workload or self.spec.workload)
            failures = any(r.metrics.get("failed", 0) for r in measured.bench_runs)
            died = server.exited_within(2.0 if failures else 0.0)
        finally:
            server.stop()
        # e.g. vLLM's "KV cache size: N tokens", max concurrency
        outcome.server_facts = self.launcher.startup_facts(server.log_text())
        (trial_dir / "bench.json").write_text(json.dumps(to_jsonable(
            {"runs": [r.to_dict() for r in measured.bench_runs]}), indent=1))
        outcome.metrics = measured.metrics
        outcome.spread = measured.spread
        outcome.server_metrics = getattr(measured.bench_runs[-1], "server_metrics", None) or {} \
            if measured.bench_runs else {}
        outcome.load_levels = [{k: v for k, v in r.items() if k != "metrics"} for r in measured.runs
                               if "load" in r]
        self._score(outcome)
        if died:
            rc = server.proc.returncode if server.proc else None
            reason = f"server crashed during the benchmark (status {rc}): {last_error_line(server.log_text())}"
            return self._infeasible(outcome, FailureKind.CRASHED, reason, keep_metrics=True)
        return outcome

    @cached_property
    def memory_wait(self) -> MemoryWait:
        """Remembers the memory before each launch and waits for it before the next (a test
        assigns one with a fake reader, clock and sleep)."""
        return MemoryWait(read=partial(read_memory, visible_gpus(self.device_env)))

    def _starter(self, n: int) -> Starter:
        def new_server(o: TrialOutcome, port: int, log: Path) -> ServerProcess:
            return ServerProcess(argv=o.argv, env={**o.env, **self.device_env}, log_path=log, port=port,
                                 host=self.host, health_path=self.launcher.health_path,
                                 pid_file=self.pid_file, cpus=self.cpus)
        return Starter(self.launcher, self.host, self.spec.startup_timeout_s, self.memory_wait,
                       new_server, on_phase=lambda p: self.cb.phase(n, p))

    # ---- confirmation ---------------------------------------------------------------------------
    def confirm(self) -> dict:
        """Re-measure the leaders on fresh servers before naming the best (see tuner/confirm.py)."""
        from kvtune.tuner.confirm import confirm

        return confirm(self)

    @cached_property
    def energy_meter(self) -> Meter | None:
        """This worker's GPUs through NVML, else RAPL; None: not measurable (a test assigns one)."""
        return open_meter(visible_gpus(self.device_env))

    def _usd_per_hour(self) -> float | None:
        """What this worker's server costs per hour (a per-GPU price times the GPUs it uses)."""
        price = self.spec.price
        if price is None:
            return None
        gpus = visible_gpus(self.device_env)
        return price.hourly(len(gpus) if gpus is not None else int(self.hardware.get("gpu_count") or 0))

    def _measure(self, n: int, base_url: str, workload: Workload) -> Measurement:
        """Measure under load, with the energy of the measured runs and the cost per 1M tokens."""
        bench = MeteredBench(self.bench, self.energy_meter)
        return account(self._measure_load(n, base_url, workload, bench), bench, self._usd_per_hour())

    def _measure_load(self, n: int, base_url: str, workload: Workload, bench: MeteredBench) -> Measurement:
        extra_body = dict(self.launcher.request_extra_body())
        if workload.shared_prefix_fraction > 0 and "cache_prompt" in extra_body:
            extra_body["cache_prompt"] = True  # the workload tests prefix caching: let it work
        options = BenchOptions(
            model=self.launcher.served_model_name(), extra_body=extra_body,
            on_phase=lambda p: self.cb.phase(n, p), goodput_fn=self._goodput, tokenizer=self.tokenizer,
            scrape_metrics=self.launcher.scrapes_metrics)  # vLLM: /metrics before, during, after
        if self.spec.primary.name == "capacity":
            return measure_capacity(
                bench, base_url, workload, self.targets, options,
                on_level=lambda load, ok: self.cb.phase(n, f"load {load:g}: {'targets hold' if ok else 'a target breaks'}"))
        watched = self._early_stop_targets(n)
        runs, auto = self.spec.repeat_plan
        measured = measure_repeats(bench, base_url, workload, runs, options, watched,
                                   converge_on=self.spec.primary.key if auto else None)
        self._stopped.pop(n, None)
        if measured.stopped:
            self._stopped[n] = measured.stopped
            self.cb.phase(n, measured.stopped)
        return measured

    def _early_stop_targets(self, n: int) -> list[Target]:
        """What the early stop watches for trial `n` (see `stopping.watched_targets`)."""
        if not self.spec.early_stop:
            return []
        trial = next((t for t in self.study.get_trials(deepcopy=False) if t.number == n), None)
        if trial is None or trial.user_attrs.get("baseline"):
            return []  # measured in full, in the search and in the confirmation
        base = next((o for o in self.outcomes() if o.baseline and o.measured), None)
        return watched_targets(self.targets, False, base.metrics if base else None)

    def _find_measured(self, candidate: Candidate) -> TrialOutcome | None:
        for o in self.outcomes():
            if o.duplicate_of is None and o.candidate == candidate and not o.baseline \
                    and not o.transient:  # a port clash or slow start is no verdict to copy
                return o
        return None

    def _score(self, outcome: TrialOutcome) -> None:
        """Constraints, objective values and the miss's reason (see tuner/scoring.py)."""
        scoring.score(outcome, self._resolved_targets(outcome), self.targets, self.spec.objective_specs)

    def _resolved_targets(self, outcome: TrialOutcome) -> list[Target] | None:
        base = next((o for o in self.outcomes() if o.baseline and o.measured), None)
        return scoring.resolved_targets(self.targets, base, outcome)

    def _infeasible(self, outcome: TrialOutcome, kind: FailureKind, reason: str,
                    keep_metrics: bool = False) -> TrialOutcome:
        return scoring.infeasible(outcome, self.targets, kind, reason, keep_metrics)

    def _tell(self, trial: optuna.trial.Trial, outcome: TrialOutcome) -> None:
        for key, value in outcome.constraints.items():
            trial.set_constraint(key, value)
        trial.set_user_attr("outcome", to_jsonable(outcome))
        # Infeasible trials still need a value; the worst possible one, so no sampler (or
        # reader of the raw study) mistakes a crash for a good result.
        measured = outcome.objectives if outcome.metrics is not None else None
        values = []
        for i, o in enumerate(self.spec.objective_specs):
            v = measured[i] if measured and i < len(measured) else None
            values.append((0.0 if o.direction is Direction.MAXIMIZE else 1e12) if v is None else v)
        self.study.tell(trial, values if len(values) > 1 else values[0])


def _study_tokenizer(launcher: Launcher) -> Any:
    path = launcher.model_path
    if not path or not Path(str(path)).exists():
        return None
    tok, _why = try_load_tokenizer(path)
    return tok
