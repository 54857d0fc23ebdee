"""Reading a study that ran: `kvtune show`, `kvtune report`, `kvtune export` (all from results.json,
or with --storage from the study's storage; a study its workers searched and nobody confirmed yet
says so: study/unconfirmed.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from kvtune.cli.app import app, console, err_console, say_wait
from kvtune.cli.progress import fmt_flags, fmt_ms
from kvtune.commands import STORAGE_ENV
from kvtune.errors import SpecError
from kvtune.study.best_figures import BestFigures
from kvtune.study.capacity_text import outcome_sentence
from kvtune.study.naming import Figure
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import StudyTime
from kvtune.study.what_would_work import WhatWouldWork
from kvtune.writable import check_file


def check_study_arg(study: str) -> None:
    """The study argument of show, report and export: not empty (Path("") is the current
    folder: it would read ./results.json) and plain text (a newline split the refusal that
    quotes it in two lines)."""
    from kvtune.cli.flag_values import plain_text
    from kvtune.readable import check_name_lengths

    if not study.strip():
        raise SpecError("the study name is empty: give a study name or its run directory")
    plain_text("the study name", study, "a study name or its run directory")
    check_name_lengths(study, f"the study {study!r}")  # else is_dir() raises 'File name too long'


def _load_results(study: str, runs_dir: Optional[str]) -> tuple[dict, Path]:
    """A study's results.json (written after every trial), by name or run-directory path."""
    from kvtune.errors import SpecError
    from kvtune.study.results_file import read_results
    from kvtune.tuner.store.storage import runs_root

    check_study_arg(study)
    d = Path(study) if Path(study).is_dir() else runs_root(runs_dir) / study
    f = d / "results.json"
    if not f.is_file():
        raise SpecError(
            f"no study {study!r} in {d.parent} (no results.json): run `kvtune run --study {study}` first "
            f"or pass --runs-dir"
        )
    return read_results(f), d  # checked: UTF-8 JSON of the shape kvtune writes (study/results_file.py)


def _study_results(study: str, runs_dir: Optional[str], storage: Optional[str]) -> tuple[dict, Path, str | None]:
    """(results, run directory, progress line): from results.json, or with `storage` from the
    study's storage as it stands while workers fill it (the line says whether it still runs)."""
    check_study_arg(study)
    if storage is None:
        results, d = _load_results(study, runs_dir)
        return results, d, None
    from kvtune.tuner.cluster_seam import read_study
    from kvtune.tuner.store.storage import runs_root

    results, progress = read_study(study, storage, on_wait=say_wait)
    return results, runs_root(runs_dir) / study, progress.line()


STORAGE_HELP = (
    "Read the study from its storage (postgresql://..., grpc://HOST:PORT of `kvtune proxy`), "
    "as it stands while workers on other hosts fill it; nothing is written to it. Or set KVTUNE_STORAGE "
    "(its password then stays out of the command line)."
)


def _comparison_file(study: str, runs_dir: Optional[str]) -> Path | None:
    """RUNS/NAME/compare.json when NAME is a comparison (no results.json of its own), else None."""
    from kvtune.artifacts.side_by_side import COMPARE_FILE
    from kvtune.tuner.store.storage import runs_root

    check_study_arg(study)
    d = Path(study) if Path(study).is_dir() else runs_root(runs_dir) / study
    f = d / COMPARE_FILE
    return f if f.is_file() and not (d / "results.json").is_file() else None


@app.command()
def show(
    study: str = typer.Argument(..., help="Study name (or its run directory)."),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs)."),
    storage: Optional[str] = typer.Option(None, envvar=STORAGE_ENV, help=STORAGE_HELP),
) -> None:
    """The study so far: best, baseline, Pareto set, failures by reason."""
    from kvtune.artifacts.overview import overview

    results, d, progress = _study_results(study, runs_dir, storage)
    ov = overview(results)
    c = ov["counts"]
    console.print(f"[bold]{ov['study']}[/bold]  {results.get('backend_version', '')}")
    if progress:
        console.print(progress, markup=False)
    console.print(
        f"{c['trials']} trials: {c['feasible']} feasible, {c['infeasible']} infeasible"
        + (f" ({c['not_held']} of them failed the re-measurement)" if c.get("not_held") else "")
        + ", "
        f"{c['duplicates']} repeats of a measured config, {c['launches_saved_by_prescreen']} launches saved by the pre-screen"
    )
    console.print("targets: " + ", ".join(ov["targets"]))
    for line in StudyTime.of_results(results).lines():  # where the hardware time went
        console.print(line, markup=False)
    console.print(_pareto_table(ov))
    primary = ov["objectives"][0].name
    figures = ov["choice"].figures
    for label, t, fig in (("best", ov["best"], ov["best_figure"]), ("baseline", ov["baseline"], ov["baseline_figure"])):
        if label == "baseline" and t is not None and t is ov["best"]:
            continue  # the defaults are the best: their line is the best's
        if t:
            console.print(_trial_line(label, t, primary, fig, figures), markup=False)
            _say_trace_capacity(t, console)
        elif label == "best":
            console.print(f"best: {_no_best(results)}", markup=False)
    change = ov["objective_change"]
    if change and not (figures is not None and figures.fresh):
        console.print(
            f"best vs baseline, {primary}: {change['change_pct']:+.1f}% +/- {change['change_pm_pct']:.1f} "
            f"({change['basis']}; +/- from {change['noise']})"
            + (": within the noise" if change["within_noise"] else ""),
            markup=False,
        )
    why = (results.get("named_best") or {}).get("why")
    if results.get("verdict"):  # the run's own verdict lines (cli/run_text.py), from results.json
        from kvtune.cli.run_text import print_verdict

        print_verdict(results["verdict"], console)
    elif why:
        console.print(f"why the best: {why}", markup=False)
    _say_unconfirmed(results, console)
    if ov["failures"]:
        console.print("[bold]failures by reason[/bold]")
        for f in ov["failures"]:
            console.print(
                f"  {f['count']:>3} x {f['category']}  (trials {f['trials']}) e.g. {f['example']}", markup=False
            )
    _show_evidence(ov, results)


def _show_evidence(ov: dict, results: dict) -> None:
    """What the figures rest on: the disturbed measurements, the trials an early stop cut short
    (a few requests, not a full measurement: shown as such) and, when nothing met the targets,
    what would (study/what_would_work.py)."""
    _show_disturbed(ov["trials"], ov["fidelity"].lines())
    from kvtune.cli.run_text import print_anchor

    print_anchor(results.get("anchor"), console)
    stopped = [t for t in ov["trials"] if t.stopped_early and t.duplicate_of is None]
    if stopped:
        console.print(
            f"stopped early (not full measurements): {', '.join(f'trial {t.number} ({t.evidence})' for t in stopped)}",
            markup=False,
        )
    if results.get("what_would_work"):
        for line in WhatWouldWork.from_dict(results["what_would_work"]).lines():
            console.print(line, markup=False)


def _trial_line(label: str, t: TrialOutcome, primary: str, fig: Figure | None, figures: BestFigures | None) -> str:
    """The best's or the baseline's line: the verdict's fresh figures with their 95% intervals
    when the best's figures are fresh (study/best_figures.py), else the search measurement, said."""
    flags = "the server's defaults" if t.baseline else fmt_flags(t.candidate)
    head = f"{label}: trial {t.number} ({flags})"
    if figures is not None and figures.fresh and t.number in (figures.trial, figures.baseline):
        if t.number == figures.trial:
            first = (
                f"; search measurement {t.objective:.4g} (selected, biased up)"
                if t.objective and not t.baseline
                else ""
            )
            return f"{head} {figures.objective_text()}{first}; {figures.rows_text()}"
        row = figures.objective_row
        base = row.defaults if row is not None else None
        obj = f"{primary} {base.text(row.unit if row else '')}" if base is not None else primary
        return f"{head} {obj}; {figures.rows_text(defaults=True)} ({figures.label()})"
    # the metrics of the same measurement as the headline figure: re-measured only when it is
    again = (t.confirmation or {}).get("metrics") if t.fresh_objective is not None else None
    m = again or t.metrics or {}
    which = "re-measured" if again else "search measurement" + ("" if t.baseline else ", selected: biased up")
    return (
        f"{head} {primary} {fig.text() if fig else '-'}; "
        f"out {m.get('output_throughput') or 0:.1f} tok/s, TTFT p95 {fmt_ms(m.get('p95_ttft_ms'))} "
        f"({which}; {t.evidence})"
    )


def _no_best(results: dict) -> str:
    """What a study without a best ended with (a verdict, or a search that stopped), or that it
    has none yet while it runs."""
    verdict = results.get("verdict") or {}
    if verdict.get("kind_text"):
        return f'none: the study ended with "{verdict["kind_text"]}"'
    stopped = (results.get("budget") or {}).get("stopped")
    if stopped:
        return f"none: no config met the targets when the search stopped ({stopped})"
    return "none yet"


def _say_trace_capacity(t: TrialOutcome, to: Console) -> None:
    """A capacity on a trace, with its unit: "holds this trace at 2.5x its recorded rate ..."."""
    held = outcome_sentence(t.confirmation, t.metrics)
    if held:
        to.print(f"  capacity on the trace: {held}", markup=False)


def _say_unconfirmed(results: dict, to: Console) -> None:
    """A study its workers searched, not confirmed yet: say so, and how (study/unconfirmed.py)."""
    from kvtune.study import unconfirmed

    note = unconfirmed.line(results)
    if note:
        to.print(note, style="yellow", markup=False, soft_wrap=True)


def _show_disturbed(trials: list, gate: list[str]) -> None:
    """The fidelity gate's lines and the measurements the machine's other load disturbed (the
    same as the run's summary)."""
    from kvtune.cli.run_text import print_disturbed
    from kvtune.study.disturbed import disturbed_measurements

    for line in gate:
        console.print(line, markup=False)
    print_disturbed(disturbed_measurements(trials), console)


def _pareto_table(ov: dict) -> Table:
    """The study's Pareto set over its objectives; for one objective, the throughput vs TTFT
    trade-off, labelled as such."""
    if ov["pareto_is_trade_off"]:
        table = Table(
            title="Trade-off, not the objective: Pareto set of output tok/s vs TTFT p95, feasible trials "
            "(search measurements)"
        )
        for col in ("trial", "flags", "out tok/s", "TTFT p95", "TPOT p95"):
            table.add_column(col)
        for t in ov["pareto"]:
            m = t.metrics or {}
            table.add_row(
                str(t.number),
                fmt_flags(t.candidate),
                f"{m.get('output_throughput') or 0:.1f}",
                fmt_ms(m.get("p95_ttft_ms")),
                fmt_ms(m.get("p95_tpot_ms")),
            )
        return table
    table = Table(title="Pareto set on fresh re-measurements: no other trial is better on every objective there")
    table.add_column("trial")
    table.add_column("flags")
    for o in ov["pareto_axes"]:
        table.add_column(o.name, justify="right")
    for t in ov["pareto"]:
        table.add_row(str(t.number), fmt_flags(t.candidate), *[f"{v:.1f}" for v in t.fresh_objectives if v is not None])
    return table


@app.command()
def report(
    study: str = typer.Argument(..., help="Study name (or its run directory)."),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs)."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="HTML file to write (default <run dir>/report.html)."
    ),
    storage: Optional[str] = typer.Option(None, envvar=STORAGE_ENV, help=STORAGE_HELP),
) -> None:
    """A self-contained HTML report (plots included; no network needed to view it). For the
    comparison a multi-backend run wrote (RUNS/NAME/compare.json), the comparison page."""
    from kvtune.artifacts.report import write_report  # imports matplotlib: only when asked

    if output is not None:
        check_file(output, "--output")  # before the study is read: nothing written when it cannot be
    compared = None if storage else _comparison_file(study, runs_dir)
    if compared is not None:
        from kvtune.artifacts.compare_report import write_compare_report
        from kvtune.artifacts.side_by_side import load_comparison

        path = write_compare_report(output or compared.parent / "report.html", load_comparison(compared))
        console.print(f"Report: {path}")
        return
    results, d, progress = _study_results(study, runs_dir, storage)
    if output is None:
        d.mkdir(parents=True, exist_ok=True)
    path = write_report(output or d / "report.html", results)
    console.print(f"Report: {path}" + (f" ({progress})" if progress else ""), markup=False)


@app.command()
def export(
    study: str = typer.Argument(..., help="Study name (or its run directory)."),
    format: str = typer.Option(
        "bash",
        "--format",
        "-f",
        help="bash, systemd, compose, k8s, bench (a script that checks a deployed server against the study's workload and targets) or csv (every trial's flags and metrics).",
    ),
    trial: Optional[int] = typer.Option(
        None, help="Trial number (default: the best; any feasible trial, e.g. one from the Pareto set)."
    ),
    host: str = typer.Option("127.0.0.1", help="Address the deployed server binds."),
    port: int = typer.Option(8080, help="Port the deployed server listens on."),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="File to write (default: print)."),
    storage: Optional[str] = typer.Option(None, envvar=STORAGE_ENV, help=STORAGE_HELP),
) -> None:
    """Deployment artifacts rendered from the trial's own argv and environment."""
    from kvtune.artifacts import export as exporter
    from kvtune.artifacts.overview import pick_trial
    from kvtune.cli.flag_values import listen_host
    from kvtune.errors import SpecError

    if format not in exporter.ALL_FORMATS:
        raise SpecError(f"unknown export format {format!r}: use one of {', '.join(exporter.ALL_FORMATS)}")
    if not 0 < port < 65536:
        raise SpecError(f"--port must be a TCP port, 1..65535, got {port}: the port the deployed server listens on")
    listen_host(host)  # a newline, a blank or a URL went into the launch script as the address
    if output is not None:
        check_file(output, "--output")
    results, _, _ = _study_results(study, runs_dir, storage)
    # csv holds every trial: it needs no feasible one
    chosen = {} if format in exporter.STUDY_FORMATS else pick_trial(results, trial).to_dict()
    if chosen:
        _say_unconfirmed(results, err_console)
    if output:
        exporter.write(output, format, chosen, results, host, port)
        err_console.print(
            f"wrote {output} (trial {chosen['number']}, {format})" if chosen else f"wrote {output} ({format})"
        )
    else:
        print(exporter.render(format, chosen, results, host, port), end="")
