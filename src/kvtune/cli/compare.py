"""`kvtune compare STUDY STUDY...`: studies already run, side by side; and the table a
multi-backend `kvtune run` ends with. The decisions (refusals, rows, the best overall: the
verdict's test on fresh runs) are made in `artifacts.side_by_side`; this module prints them and,
with --report, writes the HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from kvtune.artifacts.side_by_side import Comparison
from kvtune.cli.app import app, console, err_console
from kvtune.cli.progress import fmt_ms
from kvtune.durations import format_duration
from kvtune.errors import SpecError


def print_comparison(c: Comparison, out: Console) -> None:
    """The side-by-side table (best and defaults of each study), each best's fresh figure with its
    interval, and the best overall or why there is none."""
    table = Table(
        title=f"Side by side at the same workload and targets ({c.objective.name}; each row's figures "
        "are those its study shows for its best: 'measured' says which)"
    )
    cols = ("backend", "config", "out tok/s", "TTFT p95", "TPOT p95", "measured", "feasible", "trials", "wall time")
    for col in cols:
        table.add_column(col, justify="left" if col in ("backend", "config") else "right")
    for r in c.rows():
        if r["trial"] is None:
            config = "no feasible config" if r["role"] == "best" else "defaults: not measured"
        elif r["role"] == "best":
            config = (
                f"best: trial {r['trial']}"
                + (" (the defaults)" if r["is_defaults"] else "")
                + ("  <- best overall" if r["winner"] else "")
            )
        else:
            config = f"defaults: trial {r['trial']}"
        tput = r["output_throughput"]
        style = "bold green" if r["winner"] else ""
        table.add_row(
            r["label"],
            config,
            f"{tput:.1f}" if tput is not None else "-",
            fmt_ms(r["p95_ttft_ms"]),
            fmt_ms(r["p95_tpot_ms"]),
            r.get("basis") or "-",
            ("yes" if r["feasible"] else "no") if r["trial"] is not None else "-",
            str(r["trials"]),
            format_duration(r["wall_s"]) if r["wall_s"] is not None else "-",
            style=style,
        )
    out.print(table)
    for s in c.skipped:
        out.print(f"{s['backend']}: not tuned: {s['reason']}", markup=False)
    for side in c.sides:
        out.print(f"{c.objective.name} on fresh servers (95% interval): {side.figure_text()}", markup=False)
    w = c.winner
    if w is None:
        out.print("[bold yellow]No best overall[/bold yellow]")
        out.print(f"why: {c.why}", markup=False)
        return
    assert w.best is not None  # a winner has a best
    flags = " ".join(f"{k}={v}" for k, v in w.best.candidate.flags.items()) or "the server's defaults"
    out.print(f"[bold green]Best overall: {w.label}[/bold green], trial {w.best.number} of study {w.study} ({flags})")
    out.print(f"why: {c.why}", markup=False)


def refuse_the_same_study_twice(where: list[tuple[str, Path]]) -> None:
    """A name and a path to one study (``mo`` and ``runs/mo``) are the same study: comparing it
    with itself would name a winner of a tie with itself."""
    seen: dict[Path, str] = {}
    for given, directory in where:
        key = directory.resolve()
        if key in seen and seen[key] != given:  # the same word twice: check_comparable says so
            raise SpecError(f"{seen[key]!r} and {given!r} are the same study ({key}): compare two different studies")
        seen[key] = given


@app.command()
def compare(
    studies: list[str] = typer.Argument(
        ...,
        help="Two studies or more (names or run directories), e.g. the studies of `kvtune run --backend llama-server --backend vllm`.",
    ),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs)."),
    report: Optional[Path] = typer.Option(
        None,
        "--report",
        help="Also write an HTML page: the table and a plot of throughput against TTFT p95, one colour per study.",
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write the comparison as JSON (compare.json's shape) to this file."
    ),
) -> None:
    """Studies side by side: best and defaults of each, at the same workload and targets."""
    from kvtune.artifacts.side_by_side import check_comparable, compare_studies, write_comparison
    from kvtune.cli.study import _load_results
    from kvtune.writable import check_file

    if len(studies) < 2:
        check_comparable([(s, {}) for s in studies])  # the one-line refusal
    for flag, path in (("--output", output), ("--report", report)):
        if path is not None:  # under a file, a folder, read-only: before the table is printed
            check_file(path, flag)
    found = [(s, *_load_results(s, runs_dir)) for s in studies]
    refuse_the_same_study_twice([(s, d) for s, _, d in found])
    c = compare_studies([(s, results) for s, results, _ in found])
    print_comparison(c, console)
    if output:
        write_comparison(output, c)
        err_console.print(f"wrote {output}")
    if report:
        from kvtune.artifacts.compare_report import write_compare_report

        write_compare_report(report, c)
        console.print(f"Report: {report}")
