"""One `kvtune run`, as library code: options in, a finished (or interrupted) study out.

The CLI parses flags into a `RunOptions` and renders what this module returns; everything in
between (building the spec, opening or resuming the study, the warm start, extra workers, the
measuring loop, the confirmation phase, results.json after every trial) happens here, so a
script or a test can run a study exactly as the command line does, without a console.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import optuna

from kvtune.errors import SpecError
from kvtune.launchers.base import Launcher
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results import StudyResults, add_study_blocks, study_results, write_results
from kvtune.study.run_settings import RunSettings
from kvtune.study.spec import StudySpec, build_spec
from kvtune.study.study_file import load_study_file
from kvtune.tuner import cluster_seam as cluster
from kvtune.tuner import load_search
from kvtune.tuner.assemble import Prepared, open_tuner, prepare
from kvtune.tuner.budget import Budget
from kvtune.tuner.loop import Callbacks, Tuner
from kvtune.tuner.search import samplers
from kvtune.tuner.search.importance import ImportanceSchedule
from kvtune.tuner.search.warmstart import enqueue_warm_start
from kvtune.tuner.store.storage import check_reachable, check_runs_root, load_study, runs_root, sqlite_url
from kvtune.tuner.trace_fit import HostFitter, SpeedProbe, length_scale_given
from kvtune.tuner.trial.slots import cpu_slot, gpu_slot


@dataclass(frozen=True)
class RunOptions(RunSettings):
    """`kvtune run` as asked, checked once and never changed (a backend's leg of a comparison is
    a `replace`d copy): where and how the run executes (`RunSettings`), the study file as read
    and checked once (`file_data`; None: read when first needed), and the settings given on the
    command line over it (`given`: the study file's shape, `workload` a mapping of its own;
    `--set` and the flags), which become the StudySpec."""

    study_file: Path | None = None
    file_data: Mapping[str, Any] | None = field(default=None, repr=False)
    given: Mapping[str, Any] = field(default_factory=dict)

    def validate(self) -> "RunOptions":
        self.check_run_settings()
        check_runs_root(self.runs_dir)  # a folder under a file, or read-only: before anything is written
        return self


def study_spec(opts: RunOptions) -> StudySpec:
    """The study file's values, then the flags given, over the defaults."""
    return build_spec(dict(_file_data(opts)), opts.given)


@dataclass
class Session:
    """An opened study, ready to run: the prepared parts, the tuner and the extra workers."""

    options: RunOptions
    prepared: Prepared
    tuner: Tuner
    storage_url: str
    warm_start_labels: list[str] = field(default_factory=list)
    workers: list[subprocess.Popen] = field(default_factory=list)
    importance: ImportanceSchedule = field(default_factory=ImportanceSchedule)
    load_record: dict | None = None  # when nothing met the targets: the load search's (results "load_search")

    @property
    def results_path(self) -> Path:
        return self.prepared.run_dir / "results.json"

    @property
    def planned_trials(self) -> int:
        """What the progress display counts to: --trials, or fewer when the space (plus the
        baseline) is finite and smaller, as a grid study usually is."""
        size = self.tuner.space.size()
        trials = self.prepared.spec.trials
        return trials if size is None else min(trials, size + 1)

    def results(self, outcomes: list[TrialOutcome], final: bool = True) -> StudyResults:
        """results.json's content and the best it names; once the search stopped, with its
        "budget" (what it spent and why it stopped asking). While the study runs (`final` False)
        the importance is the last fit's, refitted every few trials (see `ImportanceSchedule`)."""
        p = self.prepared
        importance = self.importance.current(self.tuner.study, outcomes, final=final)
        results = study_results(
            p.study_name,
            p.spec.to_dict(),
            p.hardware,
            p.launcher.version(),
            [t.describe() for t in p.targets],
            p.spec.objective_specs,
            outcomes,
            importance.to_dict(),
            p.launcher.server_defaults(),
        )
        if self.tuner.budget_report is not None:
            results.payload["budget"] = self.tuner.budget_report
        blocks = self.tuner.study_report()  # the sentinel series, the verdict, the anchor, the load search
        if self.load_record:  # this run's: the stored one, or what it needs when it did not fit the budget
            blocks["load_search"] = self.load_record
        add_study_blocks(results.payload, blocks)  # their launches are the study's hardware time too
        return results

    def write_results(self) -> Path:
        """results.json as it stands now (called after every trial, so it is always current)."""
        return write_results(self.results_path, self.results(self.tuner.outcomes(), final=False).payload)

    def start_workers(self) -> None:
        """Workers for slots 1..N-1 (this process is slot 0); their logs go to the run dir."""
        o = self.options
        if o.workers > 1:
            self.workers = cluster.spawn(
                o.workers,
                self.storage_url,
                self.prepared.study_name,
                self.prepared.run_dir,
                cluster.WorkerOptions(
                    gpus_per_trial=o.gpus_per_trial,
                    runs_dir=o.runs_dir,
                    llama_server=self.prepared.spec.llama_server,
                    vllm_python=self.prepared.spec.vllm_python,
                    allow_mixed_hardware=o.allow_mixed_hardware,
                ),
            )

    def run(self, on_confirm: Callable[[int], None] = lambda k: None) -> list[TrialOutcome]:
        """Measure until the budget is spent, wait for the other workers, confirm the top
        configs. Ctrl-C (KeyboardInterrupt) passes on to the workers and propagates: the trial
        in flight is recorded as interrupted and re-queued, so the same command resumes."""
        try:
            self.tuner.run()
            for p in self.workers:
                p.wait()
            if self.prepared.spec.confirm_top > 0:
                on_confirm(self.prepared.spec.confirm_top)
                self._confirm()
            self.find_load()
            return self.tuner.outcomes()
        except KeyboardInterrupt:
            for p in self.workers:
                p.send_signal(signal.SIGINT)
            for p in self.workers:
                p.wait()
            raise

    def find_load(self) -> dict | None:
        """When nothing met the targets at the load asked: the load at which they hold, on one
        fresh server of the nearest config (tuner/load_search.py), within the time budget."""
        t = self.tuner
        if not t.coordinator.summarizes or self.results(t.outcomes(), final=False).choice.best is not None:
            return None
        budget_s = t.coordinator.budget().time_budget_s
        self.load_record = load_search.search_load(t.runner, t.records, t.cb, t.run_dir, budget_s)
        return self.load_record

    def _confirm(self) -> None:
        """The confirmation. On a storage other hosts share (--storage), through the election
        of tuner/fleet/confirmer.py, so a `kvtune confirm` elsewhere waits for this one (and
        takes over if this process dies) instead of confirming twice."""
        if not self.options.storage:
            self.tuner.confirm()
            return
        phase = self.tuner.cb.phase
        cluster.confirm_study(self.tuner, self.storage_url, wait=True, on_wait=lambda line: phase(-1, line))


def open_session(
    opts: RunOptions,
    spec: StudySpec,
    callbacks: Callbacks,
    on_prepared: Callable[[Prepared], None] = lambda p: None,
    launcher: Launcher | None = None,
    on_probe: Callable[[str], None] = lambda line: None,
    probe: SpeedProbe | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Session:
    """Prepare the parts, size a trace's replay to this host (tuner/trace_fit.py: a probe of the
    defaults, reported through `on_probe`; `probe` replaces it in tests), open (or resume) the
    study, queue a warm start. `on_prepared` runs once the study is open (the CLI prints its
    header there, so no header comes before a refusal). `launcher`: one already built (a
    multi-backend run builds each backend's first; tests pass a fake); default: the spec's
    backend. `on_wait`: says a slow storage's wait."""
    opts.validate()
    if opts.workers > 1:
        _refuse_grid(spec)
    if opts.storage:  # a database that is down: said before the runs folder is written
        check_reachable(opts.storage, on_wait)
    warm_source = _warm_start_source(opts, opts.storage)  # a study that is not there: before anything
    fitter = None
    if not length_scale_given(_file_data(opts), (opts.given.get("workload") or {}).get("trace_length_scale")):
        fitter = HostFitter(
            lambda run_dir: opts.storage or sqlite_url(run_dir), cpu_slot(0, opts.workers), on_probe, probe
        )
    if opts.workers > 1:
        _refuse_relative_targets(spec.judged_targets)
    prepared = prepare(
        spec,
        launcher=launcher,
        runs_dir=opts.runs_dir,
        device_env=gpu_slot(0, opts.gpus_per_trial),
        fit_trace=fitter,
    )
    url = opts.storage or sqlite_url(prepared.run_dir)
    session_ref: list[Session] = []

    def finished(outcome: TrialOutcome) -> None:
        callbacks.trial_finished(outcome)
        session_ref[0].write_results()

    tuner = _open_study(opts, prepared, replace(callbacks, trial_finished=finished), url)
    on_prepared(prepared)  # the header: once the study is open, never before a refusal
    if cluster.shared(opts.storage, opts.workers):  # before any worker starts: they read them there
        cluster.publish_budget(tuner.study, Budget(spec.trials, spec.time_budget_s))
    session = Session(opts, prepared, tuner, url)
    session_ref.append(session)
    if warm_source is not None:
        session.warm_start_labels = queue_warm_start(tuner.study, warm_source, prepared)
    return session


def queue_warm_start(study: optuna.Study, source: optuna.Study, prepared: Prepared) -> list[str]:
    """Queue `source`'s best configs in `study` (tuner/search/warmstart.py), in the compile order
    of the study's backend (configs sharing vLLM's compiled graphs together); their labels."""
    return enqueue_warm_start(study, source, prepared.space.knobs, compile_key=prepared.launcher.compile_key)


def _open_study(opts: RunOptions, prepared: Prepared, callbacks: Callbacks, url: str) -> Tuner:
    """The study opened (or resumed) in its storage. A refusal there (a study of that name with
    other settings) leaves no runs folder behind that `prepare` made for this run and nothing
    filled."""
    try:
        return open_tuner(
            prepared,
            callbacks,
            storage_url=url,
            allow_mixed_hardware=opts.allow_mixed_hardware,
            slot=0,
            cpus=cpu_slot(0, opts.workers),
            device_env=gpu_slot(0, opts.gpus_per_trial),
            coordinate=cluster.coordinator_for(opts.storage, opts.workers),
        )
    except BaseException:
        with contextlib.suppress(OSError):  # only an empty folder: a study's files stay
            prepared.run_dir.rmdir()
        raise


def _file_data(opts: RunOptions) -> Mapping[str, Any]:
    """The study file's values (read once: `file_data`), {} without a study file."""
    if opts.file_data is not None:
        return opts.file_data
    return load_study_file(opts.study_file) if opts.study_file else {}


def _warm_start_source(opts: RunOptions, storage: str | None) -> optuna.Study | None:
    """The --warm-start study, read before anything is prepared or written: a name mistyped is
    one line, not a study opened and a runs folder made first. Its storage: --warm-start-storage,
    else `storage`, else its own SQLite file in the runs folder."""
    if not opts.warm_start:
        return None
    url = opts.warm_start_storage or storage or sqlite_url(runs_root(opts.runs_dir) / opts.warm_start)
    study = load_study(opts.warm_start, url)
    if "spec" not in study.user_attrs:  # another program's Optuna study: its params are no flags
        raise SpecError(
            f"warm_start {opts.warm_start!r} was not created by kvtune (no stored spec): warm-start from a kvtune study"
        )
    return study


def _refuse_grid(spec: StudySpec) -> None:
    """Two workers asking at once can overshoot the budget; the one that steps back tells its
    trial FAIL, and Optuna's grid counts a failed grid point as visited: it would be lost."""
    if spec.sampler is samplers.SamplerKind.GRID:
        raise SpecError(
            "sampler grid measures one config at a time: use --workers 1 (a grid "
            "point raced by two workers would be skipped), or another sampler"
        )


def _refuse_relative_targets(targets: list[Target]) -> None:
    if any(t.relative for t in targets):
        raise SpecError(
            "targets relative to the baseline (e.g. 'ttft<0.8x') need the baseline "
            "measured first: use --workers 1, or absolute targets"
        )


def set_up_only(
    opts: RunOptions,
    spec: StudySpec,
    launcher: Launcher | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> tuple[Prepared, optuna.Study]:
    """`kvtune run --setup-only`: the study in --storage, ready for workers a scheduler places
    (tuner/fleet/setup.py), with the warm start queued; no trial runs. Many workers will share
    it, so what needs one worker (a grid, relative targets) is refused here."""
    opts.validate()
    if not opts.storage:
        raise SpecError("--setup-only needs --storage URL: a database every worker reaches, e.g. postgresql://...")
    _refuse_grid(spec)
    check_reachable(opts.storage, on_wait)  # a database that is down: said before the runs folder is written
    warm_source = _warm_start_source(opts, opts.storage)
    _refuse_relative_targets(spec.judged_targets)
    prepared = prepare(spec, launcher=launcher, runs_dir=opts.runs_dir, cpus_per_trial=opts.cpus_per_trial)
    study = cluster.set_up_study(prepared, opts.storage, opts.gpus_per_trial)
    if warm_source is not None:
        queue_warm_start(study, warm_source, prepared)
    return prepared, study
