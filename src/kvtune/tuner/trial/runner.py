"""One trial on one server: launch -> measure -> score -> a `TrialOutcome`.

The search loop (tuner/loop.py), the confirmation (tuner/confirmation.py) and any re-measurement run a
config through this one runner, so a trial is started, measured, metered, early-stopped and
scored the same way whoever asks. What the runner needs from the study is passed in: the measured
baseline (relative targets and the early stop are set from its figures) and, for a
re-measurement, another workload. The early stop's reason comes back in the `Measurement` and
ends up in the outcome; nothing is kept between trials but the memory wait's last reading.
"""

from __future__ import annotations

import json
import os
import time
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kvtune import hardware
from kvtune.bench.client import BenchOptions, slo_goodput
from kvtune.bench.fidelity_probe import ProbePlan, read_prompts, shipped_prompts
from kvtune.bench.tokenizer import try_load_tokenizer
from kvtune.clock import REAL_CLOCK, Clock
from kvtune.energy import Meter, open_meter
from kvtune.interference import Interference, Watch
from kvtune.jsonsafe import to_jsonable
from kvtune.kinds import FailureKind
from kvtune.knobs import Candidate
from kvtune.launchers.base import Launcher
from kvtune.launchers.process import ServerProcess, last_error_line
from kvtune.launchers.startup import StartupLimits
from kvtune.nvml import GpuDevice
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.trial import scoring
from kvtune.tuner.trial.capacity import measure_capacity, measure_trace_capacity
from kvtune.tuner.trial.context import LoadSearch, Placement, Subject
from kvtune.tuner.trial.disturbance import Attempts, MonitorFactory
from kvtune.tuner.trial.fidelity_check import FidelityCheck, fidelity_line, fidelity_metrics, gated
from kvtune.tuner.trial.launch_retry import LaunchFailed, Starter
from kvtune.tuner.trial.measure import Measurement, measure_repeats
from kvtune.tuner.trial.memory_wait import MemoryWait, read_memory, visible_gpus
from kvtune.tuner.trial.phase_clock import PhaseClock
from kvtune.tuner.trial.phase_window import MeteredBench, WatchedBench, account
from kvtune.tuner.trial.screening import Leader
from kvtune.tuner.trial.stopping import watched_targets
from kvtune.tuner.trial.trial_gpus import TrialGpus, trial_gpus
from kvtune.workload import Workload

Phase = Callable[[int, str], None]  # (trial number, what it is doing now)


class TrialRunner:
    """Runs trials for one worker. `pid_file` records its running server (a later run reaps a
    leftover); `on_phase` reports what a trial is doing. `monitor` builds the interference
    monitor of one launch (tuner/trial/disturbance.py; a test passes a fake), `sleep` is what the
    wait for a quiet machine sleeps with. `shell_env` is the environment servers inherit (this
    process's) and `meter_for` opens the energy meter of a trial's GPUs (a test passes fakes).
    `clock` times each launch's phases (the outcome's `time_spent`; a test passes a virtual one)."""

    def __init__(
        self,
        what: Subject,
        where: Placement,
        pid_file: Path,
        on_phase: Phase = lambda n, p: None,
        monitor: MonitorFactory | None = None,
        sleep: Callable[[float], None] = time.sleep,
        shell_env: Mapping[str, str] | None = None,
        meter_for: Callable[[TrialGpus], Meter | None] | None = None,
        clock: Clock = REAL_CLOCK,
    ):
        self.what, self.where = what, where
        self.clock = clock
        self.timer = PhaseClock(clock)  # the stopwatch of the launch in progress (one at a time)
        self.shell_env = os.environ if shell_env is None else shell_env
        self.meter_for = meter_for or self._open_meter
        self._meters: dict[tuple[int, ...], Meter | None] = {}
        self.pid_file = pid_file
        self.on_phase = on_phase
        self.monitor, self.sleep = monitor or what.monitor, sleep
        # The model's own tokenizer (GGUF vocab or HF) makes synthetic prompts exact; loaded
        # once per study, None when unavailable (prompts are then a stated approximation).
        self.tokenizer = study_tokenizer(what.launcher)
        latency = {
            t.metric: t.threshold
            for t in what.targets
            if t.upper and not t.relative and t.metric in ("ttft", "tpot", "e2el")
        }
        self._goodput = slo_goodput(latency) if latency else None
        self.screen_against: Leader | None = None  # set by ask_tell.py for one search trial (screening.py)

    @property
    def launcher(self) -> Launcher:
        return self.what.launcher

    @property
    def targets(self) -> list[Target]:
        return self.what.targets

    # The load search of a config that missed its targets (tuner/load_search.py): set for that
    # one run, which then measures the capacity below the load asked whatever the objective.
    load_search: LoadSearch | None = None

    def new_outcome(
        self, number: int, candidate: Candidate, baseline: bool, warm_start: str | None = None
    ) -> tuple[TrialOutcome, int]:
        """The outcome to fill for `candidate` (its argv for a fresh port, its environment) and
        that port (picked as the placement picks them)."""
        host = self.where.host
        port = self.where.ports(host)
        outcome = TrialOutcome(
            number=number,
            candidate=candidate,
            argv=self.launcher.command(candidate, port, host),
            env=self.launcher.environment(candidate),
            baseline=baseline,
            warm_start=warm_start,
            device_env=dict(self.where.device_env),
            cpus=sorted(self.where.cpus) if self.where.cpus else None,
        )
        return outcome, port

    def run(
        self,
        outcome: TrialOutcome,
        port: int,
        trial_dir: Path,
        baseline: TrialOutcome | None,
        workload: Workload | None = None,
        early_stop: bool = True,
    ) -> TrialOutcome:
        """Start the server of `outcome.argv`, measure it under `workload` (the study's unless
        given: the confirmation re-measures with other prompts), stop it; fill in and score.
        `baseline`: the study's measured baseline, None while it has none. Without `early_stop`
        the measurement runs in full whatever the targets (re-measurements are averaged). The
        launch's hardware-seconds by phase go into `outcome.time_spent` (study/time_spent.py)."""
        n = outcome.number
        trial_dir.mkdir(parents=True, exist_ok=True)
        self.on_phase(n, "starting server")
        self.timer = timer = PhaseClock(self.clock)
        timer.enter("startup")
        starter = self._starter(n)
        try:  # waits for the previous server's memory; retries a transient failure once
            server = starter.start(outcome, port, trial_dir)
        except LaunchFailed as e:
            timer.move(starter.waited_s, "startup")
            outcome.time_spent = timer.record().to_dict()
            outcome.transient = e.transient
            return self.infeasible(outcome, e.kind, e.reason)
        timer.move(starter.waited_s, "startup")
        timer.enter("warmup")  # until the benchmark says it measures (no warm-up: at once)
        watched = self._early_stop_targets(outcome, baseline) if early_stop else []
        try:
            measured = self._measure_until_quiet(n, server, workload or self.what.spec.workload, watched, outcome)
            failures = any(r.metrics.get("failed", 0) for r in measured.bench_runs)
            died = server.exited_within(2.0 if failures else 0.0)
            if not died and not measured.stopped:  # on the trial's own server, before it stops
                timer.enter("fidelity")
                outcome.fidelity = self._probe_fidelity(n, server.base_url, outcome, baseline)
        finally:
            timer.enter("teardown")
            server.stop()
            timer.enter(None)
        outcome.time_spent = timer.record(self.launcher.compile_cache_hit(server.log_text())).to_dict()
        self._record(outcome, measured, server, trial_dir)
        self.judge(outcome, baseline)
        if died:
            rc = server.proc.returncode if server.proc else None
            reason = f"server crashed during the benchmark (status {rc}): {last_error_line(server.log_text())}"
            return self.infeasible(outcome, FailureKind.CRASHED, reason, keep_metrics=True)
        if measured.stopped:
            self._stopped_early(outcome, measured.stopped, measured.screened)
        return outcome

    def _record(self, outcome: TrialOutcome, measured: Measurement, server: ServerProcess, trial_dir: Path) -> None:
        """The measurement into the outcome, the bench runs into the trial's folder."""
        # e.g. vLLM's "KV cache size: N tokens", max concurrency
        outcome.server_facts = self.launcher.startup_facts(server.log_text())
        windows = measured.windows or [None] * len(measured.bench_runs)
        (trial_dir / "bench.json").write_text(
            json.dumps(
                to_jsonable(
                    {
                        "runs": [{**r.to_dict(), "interference": w} for r, w in zip(measured.bench_runs, windows)],
                        "interference": outcome.interference,
                        "disturbed_attempts": outcome.disturbed_attempts,
                    }
                ),
                indent=1,
            )
        )
        outcome.metrics = (
            {**measured.metrics, **fidelity_metrics(outcome.fidelity)} if measured.metrics else measured.metrics
        )
        outcome.spread = measured.spread
        outcome.server_metrics = (
            getattr(measured.bench_runs[-1], "server_metrics", None) or {} if measured.bench_runs else {}
        )
        outcome.load_levels = [{k: v for k, v in r.items() if k != "metrics"} for r in measured.runs if "load" in r]

    def _stopped_early(self, outcome: TrialOutcome, reason: str, screened: bool = False) -> None:
        """The measurement was cut because a target could no longer hold (the trial is infeasible:
        COMPLETE with its violated constraints, so the sampler learns) or `screened`, judged on its short run."""
        if outcome.feasible and not screened:  # cannot happen (the partial figures miss too): never let it pass
            self.infeasible(outcome, FailureKind.TARGET_MISSED, reason, keep_metrics=True)
            return
        outcome.reason = reason

    @cached_property
    def fidelity_check(self) -> FidelityCheck | None:
        """The fidelity gate's probe (None: the study has no `kld` target)."""
        if not gated(self.targets):
            return None
        spec = self.what.spec
        prompts = read_prompts(spec.fidelity_prompts) if spec.fidelity_prompts else shipped_prompts()
        return FidelityCheck(self.launcher, ProbePlan(prompts), self.what.ask, REAL_CLOCK)

    def _probe_fidelity(
        self, n: int, base_url: str, outcome: TrialOutcome, baseline: TrialOutcome | None
    ) -> dict[str, Any] | None:
        """The fidelity record of this run (tuner/trial/fidelity_check.py), None without a gate."""
        check = self.fidelity_check
        if check is None:
            return None
        self.on_phase(n, f"fidelity probe: {len(check.plan.prompts)} reference prompts")
        record = check.probe(base_url, outcome, baseline)
        self.on_phase(n, fidelity_line(record))
        return record

    # ---- scoring ---------------------------------------------------------------------------------
    def judge(self, outcome: TrialOutcome, baseline: TrialOutcome | None) -> None:
        """Constraints, objective values and the miss's reason (see tuner/trial/scoring.py)."""
        resolved = scoring.resolved_targets(self.targets, baseline, outcome)
        scoring.judge(outcome, resolved, self.targets, self.what.spec.objective_specs)

    def infeasible(
        self, outcome: TrialOutcome, kind: FailureKind, reason: str, keep_metrics: bool = False
    ) -> TrialOutcome:
        return scoring.infeasible(outcome, self.targets, kind, reason, keep_metrics)

    def _early_stop_targets(self, outcome: TrialOutcome, baseline: TrialOutcome | None) -> list[Target]:
        """What the early stop watches (see `stopping.watched_targets`): nothing on the baseline,
        measured in full; no relative target on disturbed baseline figures (tuner/anchor.py)."""
        if not self.what.spec.early_stop or outcome.baseline:
            return []
        return watched_targets(self.targets, False, baseline.metrics if baseline and not baseline.disturbed else None)

    # ---- the server and the load -----------------------------------------------------------------
    @cached_property
    def memory_wait(self) -> MemoryWait:
        """Remembers the memory before each launch and waits for it before the next (a test
        assigns one with a fake reader, clock and sleep)."""
        return MemoryWait(read=partial(read_memory, visible_gpus(self.where.device_env)))

    @cached_property
    def gpu_devices(self) -> Sequence[GpuDevice]:
        """The GPUs NVML lists on this host, read once (a test assigns recorded ones)."""
        return hardware.gpu_report().gpus

    def trial_gpus(self, outcome: TrialOutcome) -> TrialGpus:
        """The GPUs this trial's server uses: those its environment leaves visible (the shell's,
        the candidate's, this worker's slot, the last winning), the first as many as its
        backend's world size (tuner/trial/trial_gpus.py)."""
        env = {**self.shell_env, **outcome.env, **self.where.device_env}
        return trial_gpus(env, self.launcher.gpus_used(outcome.candidate), self.gpu_devices)

    def _open_meter(self, gpus: TrialGpus) -> Meter | None:
        """The trial's GPUs through NVML (one meter per GPU set, kept); a trial on no GPU: the CPU
        packages through RAPL; None: not measurable, or GPUs NVML cannot meter one by one."""
        if gpus.indices is None:
            return None
        if gpus.indices not in self._meters:
            self._meters[gpus.indices] = open_meter(gpus.indices)
        return self._meters[gpus.indices]

    def new_server(self, o: TrialOutcome, port: int, log: Path) -> ServerProcess:
        """The (unstarted) server of `o`: its argv and env, the worker slot's devices, and what
        the launcher sets on every server kvtune starts (vLLM's compile cache, one per model)."""
        where = self.where
        return ServerProcess(
            argv=o.argv,
            env={**self.launcher.server_environment(), **o.env, **where.device_env},
            log_path=log,
            port=port,
            host=where.host,
            health_path=self.launcher.health_path,
            pid_file=self.pid_file,
            cpus=where.cpus,
        )

    def _starter(self, n: int) -> Starter:
        return Starter(
            self.launcher,
            self.where.host,
            StartupLimits(stall_s=self.what.spec.startup_stall_s, cap_s=self.what.spec.startup_timeout_s),
            self.memory_wait,
            self.new_server,
            on_phase=lambda p: self.on_phase(n, p),
            fresh_port=self.where.ports,
        )

    def _usd_per_hour(self, gpus: TrialGpus) -> float | None:
        """What this trial's server costs per hour (a per-GPU price times the GPUs it uses)."""
        price = self.what.spec.price
        return None if price is None else price.hourly(gpus.count)

    def _measure_until_quiet(
        self, n: int, server: ServerProcess, workload: Workload, watched: list[Target], outcome: TrialOutcome
    ) -> Measurement:
        """Measure on `server`; a measurement the interference monitor judged disturbed is dropped
        and taken again once the machine is quiet (bounded, see tuner/trial/disturbance.py). The
        kept measurement's window goes into `outcome.interference`, the dropped ones' into
        `outcome.disturbed_attempts`; a dropped measurement's time and the wait for quiet are waits."""
        watch = self.monitor(lambda: (server.proc.pid,) if server.proc else (), visible_gpus(self.where.device_env))
        attempts = Attempts(watch, lambda text: self.on_phase(n, text), self.sleep)
        attempt, gpus = 1, self.trial_gpus(outcome)
        timer = self.timer
        while True:
            before = timer.snapshot()
            measured, window = self._measure(n, server.base_url, workload, watched, watch, gpus)
            timer.enter("waits")  # judging the window, and waiting for quiet when it was disturbed
            if not attempts.again(window, attempt, server.alive()):
                break
            timer.dropped(since=before)  # that measurement held the hardware for nothing
            attempt += 1
        outcome.interference = window.to_dict() if window is not None else None
        outcome.disturbed_attempts = [w.to_dict() for w in attempts.replaced]
        return measured

    def _measure(
        self, n: int, base_url: str, workload: Workload, watched: list[Target], watch: Watch, gpus: TrialGpus
    ) -> tuple[Measurement, Interference | None]:
        """Measure under load, with the energy of the measured runs on the trial's `gpus`, the cost
        per 1M tokens of those GPUs and the worst interference window of the runs."""
        observed = WatchedBench(self.what.bench, watch)
        bench = MeteredBench(observed, self.meter_for(gpus))
        measured = account(self._measure_load(n, base_url, workload, bench, watched), bench, self._usd_per_hour(gpus))
        measured.windows = [w.to_dict() if (w := observed.of(r)) else None for r in measured.bench_runs]
        return measured, observed.worst(measured.bench_runs)

    def _measure_load(
        self, n: int, base_url: str, workload: Workload, bench: MeteredBench, watched: list[Target]
    ) -> Measurement:
        spec = self.what.spec
        options = BenchOptions(
            model=self.launcher.served_model_name(),
            extra_body=request_extra_body(self.launcher, workload),
            on_phase=lambda p: self.on_phase(n, self.timer.heard(p)),  # "warmup", "measuring" move it
            goodput_fn=self._goodput,
            slo=spec.slo,
            tokenizer=self.tokenizer,
            scrape_metrics=self.launcher.scrapes_metrics,
        )  # vLLM: /metrics before, during, after
        if spec.primary.name == "capacity" or self.load_search is not None:
            on_trace = workload.trace is not None  # a trace's load is its replay speed

            def on_level(load: float, ok: bool) -> None:
                level = f"trace at {load:g}x speed" if on_trace else f"load {load:g}"
                self.on_phase(n, f"{level}: {'targets hold' if ok else 'a target breaks'}")

            if self.load_search is not None:
                bound = self.load_search
                return measure_capacity(bench, base_url, workload, bound.targets, options, on_level, bound.plan)
            search = measure_trace_capacity if on_trace else measure_capacity
            held = [t for t in self.targets if not t.fidelity]  # the answers do not move with the load
            return search(bench, base_url, workload, held, options, on_level=on_level)
        runs, auto = spec.repeat_plan
        converge = spec.primary.key if auto else None
        measured = measure_repeats(
            bench, base_url, workload, runs, options, watched, converge, self.screen_against, spec.screen_fraction
        )
        if measured.stopped:
            self.on_phase(n, measured.stopped)
        return measured


def request_extra_body(launcher: Launcher, workload: Workload) -> dict[str, Any]:
    """The launcher's per-request fields. Synthetic prompts defeat llama-server's prompt cache
    (each request pays its own prefill); a workload that shares prefixes (a system prompt,
    conversations, a trace) runs with it on, as a user's server would."""
    extra_body = dict(launcher.request_extra_body())
    if workload.reuses_prefixes and "cache_prompt" in extra_body:
        extra_body["cache_prompt"] = True
    return extra_body


def study_tokenizer(launcher: Launcher) -> Any:
    """The model's tokenizer (GGUF vocab or HF folder), None when there is none to load."""
    path = launcher.model_path
    if not path or not Path(str(path)).exists():
        return None
    tok, _why = try_load_tokenizer(path)
    return tok
