"""One study, run with the chosen progress display and summarised: what `kvtune run` does with
one backend, and what a run with several backends (cli/multi.py) does for each of them. Kept apart
from cli/run.py (the flags) so both import it and neither imports the other."""

from __future__ import annotations

import shlex
import signal
import sys
import time
from typing import Any, Callable

from rich.console import Console

from kvtune.artifacts.summary import StudySummary, summarize
from kvtune.cli.app import console, err_console, say_wait
from kvtune.cli.consoles import make_console
from kvtune.cli.progress import make_reporter
from kvtune.cli.run_text import print_header, print_summary
from kvtune.errors import SpecError
from kvtune.interference import Monitor, Watch, preflight, warning
from kvtune.launchers.base import Launcher
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.events import Callbacks
from kvtune.tuner.session import RunOptions, Session, open_session, set_up_only, study_spec
from kvtune.tuner.store.storage import redact
from kvtune.verdict import ALPHA


def _check_gpu_price(spec: Any, opts: RunOptions) -> None:
    """A per-GPU price needs GPUs: refuse before anything starts on a host without them."""
    from kvtune import nvml

    if spec.price is not None and spec.price.per_gpu and opts.gpus_per_trial == 0:
        report = nvml.read()
        if report is None or not report.gpus:
            raise SpecError(
                "price_per_gpu_hour needs GPUs and this machine has none that NVML "
                "sees: give price_per_hour (the whole machine) instead"
            )


def interrupt_on_sigterm() -> None:
    """SIGTERM stops a run like Ctrl-C does (trial recorded as interrupted, server stopped), and
    Ctrl-C works even when kvtune was started with SIGINT ignored (a background job)."""

    def to_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, to_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_study(
    opts: RunOptions,
    mode: str,
    launcher: Launcher | None = None,
    print_best: bool = True,
    on_summary: Callable[[StudySummary, list[TrialOutcome]], None] | None = None,
) -> int:
    """Open the study, run it with the chosen progress display, print the summary. `launcher`:
    one already built (default: the spec's backend); `print_best`: --quiet prints the best
    command line (a multi-backend run prints only the overall one); `on_summary`: given the
    summary and the trials once written (a multi-backend run compares them from memory)."""
    spec = study_spec(opts)
    _check_gpu_price(spec, opts)
    if opts.setup_only:
        return _set_up_only(opts, spec, launcher)
    out = make_console(quiet=mode in ("quiet", "jsonl"))
    late = _LateReporter()
    try:
        session = open_session(
            opts,
            spec,
            late.callbacks(),
            on_prepared=lambda p: print_header(p, out),
            launcher=launcher,
            on_probe=lambda line: out.print(f"[dim]{line}[/dim]"),
            on_wait=say_wait,
        )
    except KeyboardInterrupt:  # e.g. during a trace's speed probe: no study exists yet
        err_console.print(
            "\ninterrupted before the first trial: nothing was measured and the server stopped. "
            "Run the same command to start again."
        )
        return 130
    if session.warm_start_labels:
        out.print(f"warm start: queued {', '.join(session.warm_start_labels)} (adapted to this search space)")
    done = session.tuner.completed()
    if done:
        out.print(f"[dim]resuming: {done} measured trial(s) kept[/dim]")
    out.print()
    reporter = late.reporter = make_reporter(mode, console, session.planned_trials, done)
    if not done:  # a resumed study's baseline already ran: what it met is recorded with it
        check_machine(Monitor(), reporter, mode)
    interrupt_on_sigterm()
    session.start_workers()
    if session.workers:
        out.print(
            f"{opts.workers} workers: this one and {len(session.workers)} more "
            f"(logs: {session.prepared.run_dir}/worker-*.log)"
        )
    try:
        outcomes = session.run(on_confirm=lambda k: out.print(_confirming(session.prepared.spec)))
    except KeyboardInterrupt:
        reporter.close()
        err_console.print(
            f"\ninterrupted: the running trial is recorded as interrupted and the server "
            f"stopped; study saved in {session.prepared.run_dir}. Run the same command to resume."
        )
        return 130
    reporter.close()
    return _finish(session, outcomes, out, reporter, mode, print_best, on_summary)


def _set_up_only(opts: RunOptions, spec: Any, launcher: Launcher | None) -> int:
    """`--setup-only`: create the study for a scheduler's workers and say how to place them."""
    prepared, study = set_up_only(opts, spec, launcher, on_wait=say_wait)
    url = redact(opts.storage or "")
    console.print(
        f"study {prepared.study_name} set up in {url}: spec, queued baseline, budget of {spec.trials} trials; "
        "no trial ran (the first worker records the hardware and starts the clock)"
    )
    console.print(
        f"place its workers: kvtune export-workers --format slurm|k8s-job --storage URL --study {prepared.study_name} "
        f"--workers N -o FILE"
    )
    return 0


def check_machine(watch: Watch, reporter: Any, mode: str, sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Pre-flight: watch the machine for a few seconds before the baseline (every relative target
    is measured against it) and warn when something else is already using it. The warning goes
    to stderr, and with --jsonl also as a ``preflight`` event; returns it (None: quiet)."""
    seen = preflight(watch, sleep=sleep)
    text = warning(seen)
    if mode == "jsonl" and seen is not None:
        reporter.emit("preflight", disturbed=seen.disturbed, warning=text, interference=seen.to_dict())
    if text is not None:
        err_console.print(f"[yellow]warning:[/yellow] {text}")
    return text


def _confirming(spec: Any) -> str:
    """The line that opens the confirmation: what it will measure, on fresh servers."""
    screen = (
        f"the top {spec.confirm_top} are screened (one fresh run each per round, up to {spec.confirm_rounds} rounds), "
        if spec.confirm_top > 1
        else ""
    )
    if len(spec.objective) > 1:
        screen = f"the Pareto set (up to {spec.confirm_top} + 3) and the baseline get one fresh run each, "
    return (
        f"\n[bold]Confirming[/bold]: {screen}then one config and the server's defaults alternate "
        f"D W W D on fresh servers until the answer is clear (at most {spec.confirm_pairs} pairs, "
        f"{ALPHA:.0%} chance of a false win)"
    )


class _LateReporter:
    """Callbacks for the tuner that reach a reporter made once the study is open (the live
    display's bar starts at the trials a resumed study already has)."""

    reporter: Any = None

    def callbacks(self) -> Callbacks:
        return Callbacks(
            trial_started=lambda n, c, b: self.reporter.started(n, c, b),
            phase=lambda n, p: self.reporter.phase(n, p),
            trial_finished=lambda o: self.reporter.finished(o),
        )


def _finish(
    session: Session,
    outcomes: list,
    out: Console,
    reporter: Any,
    mode: str,
    print_best: bool = True,
    on_summary: Callable[[StudySummary, list[TrialOutcome]], None] | None = None,
) -> int:
    p = session.prepared
    summary = summarize(
        p.run_dir,
        session.results(outcomes),
        outcomes,
        p.spec.objective_specs,
        p.targets,
        session.options.deploy_host,
        session.options.deploy_port,
        rerun=shlex.join(["kvtune", *sys.argv[1:]]),  # the command that resumes this run
    )
    print_summary(p, summary, out)
    if on_summary is not None:
        on_summary(summary, outcomes)
    if mode == "jsonl":
        reporter.emit("summary", exit_status=summary.exit_code, **summary.payload)
    elif mode == "quiet" and summary.exit_code == 0 and print_best:
        print(summary.best_command)
    return summary.exit_code
