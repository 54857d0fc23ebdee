"""How `kvtune run` shows a study: the header before the first trial and the summary after the
last. Console code only; every decision it shows was made in `artifacts.summary`."""

from __future__ import annotations

from typing import Sequence

from rich.console import Console
from rich.table import Table

from kvtune import __version__, hardware
from kvtune.artifacts.summary import StudySummary
from kvtune.cli.progress import fmt_flags
from kvtune.durations import format_duration
from kvtune.knobs import Candidate
from kvtune.study.capacity_text import outcome_sentence
from kvtune.study.disturbed import DisturbedMeasurement
from kvtune.study.naming import headline
from kvtune.study.time_spent import StudyTime
from kvtune.tuner import anchor
from kvtune.tuner.assemble import Prepared
from kvtune.verdict import Verdict
from kvtune.verdict.text import summary_lines


def print_header(p: Prepared, console: Console) -> None:
    spec, w = p.spec, p.spec.workload
    console.print(f"[bold]kvtune {__version__}[/bold]  study [bold]{p.study_name}[/bold]  ({p.run_dir})")
    console.print(f"backend  {p.launcher.version()}  ({p.launcher.command(Candidate(), 0)[0]})")
    console.print(f"model    {p.launcher.model_path}")
    console.print(f"hardware {hardware.describe(p.hardware)}")
    if p.trace_sizing is not None:
        console.print(f"workload {w.describe()} (+{w.warmup_requests} warm-up, not measured)", markup=False)
        console.print(f"trace    {p.trace_sizing.describe()}", markup=False)
        if p.host_fit is not None:
            console.print(f"host     {p.host_fit.describe()}", markup=False)
    else:
        console.print(
            f"workload {w.describe()}; {w.num_requests} requests (+{w.warmup_requests} warm-up, not measured)"
        )
    console.print("targets  " + ", ".join(t.describe() for t in p.targets) + "   [dim](a bare metric means p95)[/dim]")
    console.print(
        "objective "
        + ", ".join(f"{o.name} ({o.direction})" for o in spec.objective_specs)
        + f", {spec.trials} trials incl. baseline"
        + (f", time budget {format_duration(spec.time_budget_s)}" if spec.time_budget_s else "")
    )
    console.print("space    " + "; ".join(p.space.describe()))


def print_summary(p: Prepared, s: StudySummary, console: Console) -> None:
    console.print()
    _spending(s, console)
    print_disturbed(s.disturbed, console)
    print_anchor(s.payload.get("anchor"), console)
    for line in s.fidelity.lines() if s.fidelity is not None else ():
        console.print(line, markup=False)
    if s.best is None:
        _no_feasible(p, s, console)
        return
    if s.pareto:
        _pareto(p, s, console)
    best = s.best
    label = "the server's defaults" if best.baseline else fmt_flags(best.candidate)
    console.print(f"[bold green]Best feasible config: trial {best.number}[/bold green] ({label})")
    verdict, noise = s.choice.naming.verdict, s.choice.objective_noise
    why = f"; why this one: {s.choice.naming.why}" if s.choice.naming.why and verdict is None else ""
    console.print(
        f"{best_line(s, p.spec.primary.name, headline(best, noise))}; evidence: {best.evidence}{why}", markup=False
    )
    held = outcome_sentence(best.confirmation, best.metrics)  # capacity on a trace, with its unit
    if held:
        console.print(f"capacity on the trace: trial {best.number} {held}", markup=False)
    for pair in noise.inconsistent:
        console.print(
            f"[yellow]Inconsistent measurements[/yellow] of trial {pair['trial']}: "
            f"{' and '.join(f'{v:.4g}' for v in pair['values'])} disagree beyond the noise "
            f"({pair['against']}); not averaged, and not used to size the noise."
        )
    _print_lines(summary_lines(verdict) if verdict is not None else [], console)
    if best.baseline:
        console.print(
            "The server's defaults were best: keep them (the verdict above says why)."
            if verdict is not None
            else "The server's defaults measured best in the search (not confirmed: no verdict ran)."
        )
    _versus_baseline(s, console)
    for line in s.cost_energy:
        console.print(line, markup=False)
    _startup(s, console)
    _confirmation(s.payload.get("confirmation"), console, decided=verdict is not None)
    _drift(s.payload.get("sentinel"), console)
    for fate in s.warm_start:
        held = (
            f"held: feasible here, rank {fate.rank} of {fate.of}"
            if fate.held
            else f"did not hold here: {fate.outcome.reason}"
        )
        console.print(f"Warm start {fate.outcome.warm_start} -> trial {fate.outcome.number}: {held}")
    if s.launches_saved:
        console.print(f"The KV/context pre-screen skipped {s.launches_saved} launch(es) that could not work.")
    console.print("\n[bold]Best command line:[/bold]")
    console.print(s.best_command, soft_wrap=True, markup=False, highlight=False)
    console.print(f"\nLaunch script:     {s.launch_script}")
    console.print(f"Verify script:     {s.verify_script} (re-runs the workload against the deployed server)")
    console.print(f"Per-trial results: {s.results_path}")


def print_disturbed(disturbed: Sequence[DisturbedMeasurement], console: Console) -> None:
    """The measurements the machine's other load disturbed, and what became of each."""
    if not disturbed:
        return
    console.print(
        f"[yellow]Disturbed measurements[/yellow] ({len(disturbed)}: the machine was busy "
        "with something else while they ran):"
    )
    for d in disturbed:
        console.print(f"  {d.text()}", markup=False)


def print_anchor(block: dict | None, console: Console) -> None:
    """What relative targets were judged against when the defaults' first measurement was
    disturbed (results.json's "anchor" block, tuner/anchor.py); nothing in the plain case."""
    line = anchor.summary_line(block)
    if line:
        console.print(line, markup=False)


def _spending(s: StudySummary, console: Console) -> None:
    """What the budget bought: why the search stopped when it was not --trials, the free asks,
    and the wall time early stops saved."""
    b = s.budget
    if b.get("stopped") and b["stopped"] != "trials":
        console.print(f"[yellow]Stopped asking[/yellow] ({b['stopped']}): {b.get('message', '')}")
    free = [
        f"{n} {what}"
        for n, what in (
            (b.get("pre_screened"), "pre-screen rejection(s)"),
            (b.get("duplicates"), "repeat(s) of a measured config"),
        )
        if n
    ]
    if free:
        console.print(
            f"Budget: {b.get('measured', 0)} of {b.get('trials', 0)} trials measured; "
            f"{' and '.join(free)} cost no launch and did not count."
        )
    if s.early_stop is not None:
        e = s.early_stop
        console.print(
            f"Early stop: {e.trials} trial(s) stopped once a target could no longer hold, "
            f"saving about {format_duration(e.saved_s)} of measurement "
            f"(they took {format_duration(e.spent_s)})."
        )
    for line in StudyTime.of_results(s.payload).lines():  # where the hardware time went
        console.print(line, markup=False)


def _no_feasible(p: Prepared, s: StudySummary, console: Console) -> None:
    verdict = s.choice.naming.verdict
    _print_lines(summary_lines(verdict) if verdict is not None else [], console)
    console.print(
        f"[bold red]No feasible config[/bold red] in {len(s.payload['trials'])} trials "
        f"for {', '.join(t.describe() for t in p.targets)}."
    )
    if s.nearest_misses and all(m.outcome.feasible and m.outcome.disturbed for m in s.nearest_misses):
        console.print(
            "The machine's other load disturbed every measurement, so none is evidence: "
            "run again when it is quiet (results.json 'disturbed' lists the load seen)."
        )
    console.print("Nearest misses:")
    for miss in s.nearest_misses:
        o = miss.outcome
        stopped = f" [{o.evidence}]" if o.stopped_early else ""
        console.print(f"  trial {o.number} ({fmt_flags(o.candidate)}): {miss.reason}{stopped}", markup=False)
    _print_lines(s.what_would_work.lines() if s.what_would_work is not None else [], console)
    if p.trace_sizing is not None:
        console.print(f"Trace: {p.trace_sizing.load_hint()}", markup=False)
    console.print(f"Per-trial results: {s.results_path}")


def _pareto(p: Prepared, s: StudySummary, console: Console) -> None:
    table = Table(title="Pareto set on fresh re-measurements: no other trial is better on every objective there")
    table.add_column("trial")
    table.add_column("flags")
    for obj in p.spec.objective_specs:
        table.add_column(obj.name, justify="right")
    for o in s.pareto:
        table.add_row(str(o.number), fmt_flags(o.candidate), *[f"{v:.1f}" for v in o.fresh_objectives if v is not None])
    console.print(table)
    console.print(
        f"Pick one with `kvtune export {p.study_name} --trial N`; the launch script below "
        f"takes the best {p.spec.primary.name}."
    )


def _startup(s: StudySummary, console: Console) -> None:
    """Start-up seconds of the best and the baseline: on GPUs (weights, CUDA graphs) they are most
    of what a trial, and every restart in production, costs."""
    parts = [
        f"{label} {o.startup_s:.0f} s"
        for label, o in (("best", s.best), ("baseline", s.baseline))
        if o is not None and o.startup_s is not None and (label == "best" or o is not s.best)
    ]
    if parts:
        console.print("start-up (launch to healthy): " + ", ".join(parts))


def _versus_baseline(s: StudySummary, console: Console) -> None:
    base = s.baseline
    if base is None or not base.metrics:
        console.print(
            f"[yellow]No baseline measurement to compare with[/yellow] ({base.reason if base else 'not run'})."
        )
        return
    assert s.best is not None  # only called with a best (see print_summary)
    if s.best.number == base.number:  # the defaults won: a table of the baseline against itself says nothing
        return
    basis = s.choice.versus_basis or "1 measurement each"
    table = Table(
        title=f"best (trial {s.best.number}) vs baseline (trial {base.number}, the server's defaults), {basis}"
    )
    for col in ("metric", "baseline", "best", "change"):
        table.add_column(col, justify="right" if col != "metric" else "left")
    rows = s.choice.versus_baseline
    for row in rows:
        table.add_row(row["label"], f"{row['baseline']:.1f}", f"{row['best']:.1f}", change_text(row))
    console.print(table)
    if any("change_low_pct" in row for row in rows):
        console.print(
            "[...] of each change: its 95% interval from the verdict's fresh runs; dim: it holds 0.", markup=False
        )
        return
    sources = sorted({row["noise"] for row in rows if row.get("noise")})
    if sources:
        console.print(
            "+/- of each change: 95%, from this study's noise per metric ("
            + "; ".join(sources)
            + "); dim: within the noise.",
            markup=False,
        )


def best_line(s: StudySummary, name: str, search_headline: str) -> str:
    """The best's headline figure: the verdict's fresh runs with their interval
    (study/best_figures.py) and its search measurement labelled as such; without fresh runs,
    the search figure as `headline` labels it."""
    f = s.choice.figures
    if f is None or not f.fresh:
        return f"{name}: {search_headline}"
    first = s.best.objective if s.best is not None and not s.best.baseline else None
    search = f"; search measurement {first:.4g} (selected, biased up)" if first is not None else ""
    return f.objective_text() + search


def change_text(row: dict) -> str:
    """``+29.8% [+11.4%, +51.3%]`` (the verdict's fresh runs) or ``+12.3% +/- 9.1`` (search
    measurements, the study's noise), coloured by better/worse, dim when the change is within
    the noise (its interval holds 0)."""
    lo, hi = row.get("change_low_pct"), row.get("change_high_pct")
    pm = f" +/- {row['change_pm_pct']:.1f}" if isinstance(row.get("change_pm_pct"), (int, float)) else ""
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        pm = f" [{lo:+.1f}%, {hi:+.1f}%]"
    color = "dim" if row.get("within_noise") else "green" if row["better"] else "red"
    return f"[{color}]{row['change_pct']:+.1f}%{pm}[/{color}]"


def _confirmation(conf: dict | None, console: Console, decided: bool = False) -> None:
    """How the re-measured configs rank by their averaged figures. Where a verdict decided
    (`decided`), only which configs were re-measured: the verdict's lines say the decision, and
    a second ranking would read as a second verdict."""
    if not conf:
        return
    order = " > ".join(map(str, conf["order_after"]))
    dropped = conf.get("no_longer_feasible") or []
    if decided:
        console.print(
            f"Confirmation: re-measured trials {conf['remeasured']} on fresh servers (0 is the baseline)"
            + (f"; no longer feasible: {dropped}" if dropped else "")
            + "; the verdict above rests on those runs."
        )
        return
    if conf["held"]:
        console.print(
            f"Confirmation: re-measured trials {conf['remeasured']} with fresh servers; "
            f"the ranking held ({order}; 0 is the baseline)."
        )
        return
    console.print(
        f"[yellow]Confirmation changed the ranking[/yellow] (0 is the baseline): before "
        f"{' > '.join(map(str, conf['order_before']))}, averaged with the re-measurement "
        f"{order}"
        + (f"; no longer feasible: {dropped}" if dropped else "")
        + ". The best is named only among configs that held when re-measured."
    )


def verdict_lines(stored: dict | None) -> list[str]:
    """The verdict as the summary prints it (verdict/text.py); empty without a verdict."""
    return summary_lines(Verdict.from_dict(stored)) if stored else []


def print_verdict(stored: dict | None, console: Console) -> None:
    """The verdict results.json recorded (`kvtune show`)."""
    _print_lines(verdict_lines(stored), console)


def _print_lines(lines: Sequence[str], console: Console) -> None:
    for line in lines:
        console.print(line, markup=False)


def _drift(block: dict | None, console: Console) -> None:
    """The baseline sentinel's series and its drift, first vs last."""
    if not block:
        return
    series = " -> ".join(
        f"{p['objective']:.4g}" if isinstance(p.get("objective"), (int, float)) else "-"
        for p in block.get("series") or []
    )
    counts = ", ".join(str(p["measured"]) for p in block.get("series") or [])
    line = f"Baseline sentinel (after {counts} measured trials): {series}"
    drift = block.get("drift")
    if drift:
        verdict = (
            "beyond the noise: the machine's state changed during the study"
            if drift["beyond_noise"]
            else "within the noise"
        )
        line += f"; drift {(drift['ratio'] - 1) * 100:+.1f}% first to last, {verdict} ({drift['noise']})"
    disturbed = sum(1 for p in block.get("series") or [] if p.get("disturbed"))
    if disturbed:
        line += f"; {disturbed} point(s) disturbed, not used"
    console.print(line, markup=False)
