"""`kvtune run` with several backends (--backend A --backend B, or --backend auto): each backend
is tuned as its own study through the ordinary one-study path (`cli.one_study.run_study`: header,
progress, summary, results.json, launch script), one after the other, then the studies are put
side by side and the comparison is written to RUNS/NAME/compare.json. The plan (which backends,
what model each serves, the budget split) is `tuner.multi_backend`'s; the table is
`cli.compare`'s, the same one `kvtune compare` prints."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from kvtune.artifacts.side_by_side import COMPARE_FILE, compare_studies, write_comparison
from kvtune.cli.app import err_console
from kvtune.cli.compare import print_comparison
from kvtune.cli.consoles import make_console
from kvtune.cli.one_study import run_study
from kvtune.clock import REAL_CLOCK, Clock
from kvtune.durations import format_duration
from kvtune.jsonsafe import dumps
from kvtune.launchers.registry import create_launcher
from kvtune.tuner.multi_backend import BackendChoice, LauncherFactory, plan_backends
from kvtune.tuner.session import RunOptions
from kvtune.tuner.store.storage import runs_root

INTERRUPTED = 130


def run_backends(
    opts: RunOptions,
    choice: BackendChoice,
    hf_model: str | None,
    mode: str,
    factory: LauncherFactory = create_launcher,
    clock: Clock = REAL_CLOCK,
) -> int:
    """Plan, run each backend's study, compare. Exit status: 0 with a best overall, 1 when no
    backend found a feasible config, 130 when interrupted (the same command resumes)."""
    began = clock.monotonic()
    plan = plan_backends(opts, choice, hf_model, factory)
    out = make_console(quiet=mode in ("quiet", "jsonl"))
    for s in plan.skipped:
        err_console.print(
            f"kvtune: {s.backend} cannot serve this model here, going on without it: {s.reason}",
            markup=False,
            soft_wrap=True,
        )
    out.print(
        f"[bold]{len(plan.legs)} backend(s), one after the other[/bold] ({plan.split_note()}), "
        f"each its own study: {', '.join(leg.study for leg in plan.legs)}"
    )
    prepared_s = clock.monotonic() - began
    root = runs_root(opts.runs_dir)
    walls: dict[str, float] = {}
    code = _run_legs(plan.legs, mode, out, clock, root, walls)
    if code == INTERRUPTED:
        return INTERRUPTED
    studies = [(leg.study, json.loads((root / leg.study / "results.json").read_text())) for leg in plan.legs]
    c = compare_studies(studies, name=plan.name, skipped=[asdict(s) for s in plan.skipped], wall_s=walls, at_least=1)
    path = write_comparison(root / plan.name / COMPARE_FILE, c)
    out.print()
    out.rule("Which backend?")
    print_comparison(c, out)
    total = clock.monotonic() - began
    legs = ", ".join(f"{leg.backend} {format_duration(walls[leg.study])}" for leg in plan.legs)
    out.print(
        f"Wall time {format_duration(total)}: {legs} (start-ups and confirmation included), "
        f"{format_duration(prepared_s)} finding the backends and preparing the model."
    )
    out.print(f"Comparison: {path}  (again: kvtune compare {' '.join(s for s, _ in studies)})")
    if mode == "jsonl":
        print(dumps({"event": "comparison", "time": clock.wall(), **c.to_dict()}), flush=True)
    elif mode == "quiet" and c.winner is not None and c.winner.best_command:
        print(c.winner.best_command)
    return 0 if c.winner is not None else 1


def _run_legs(legs: list, mode: str, out: Any, clock: Clock, root: Path, walls: dict[str, float]) -> int:
    """Each backend's study in turn (their wall times into `walls`); INTERRUPTED stops the rest.
    A trace is replayed with the length scale the first study fitted, by every backend."""
    scale: float | None = None
    for i, leg in enumerate(legs, 1):
        out.print()
        out.rule(f"{leg.backend} ({i} of {len(legs)}): study {leg.study}")
        options = leg.options
        if scale is not None:
            out.print(f"[dim]trace lengths scaled by {scale:g}, as the first backend's study fitted them[/dim]")
            options = replace(options, spec_overrides=options.spec_overrides.with_workload(trace_length_scale=scale))
        start = clock.monotonic()
        code = run_study(options, mode, launcher=leg.launcher, print_best=False)
        walls[leg.study] = round(clock.monotonic() - start, 1)
        if code == INTERRUPTED:
            left = [x.backend for x in legs[i:]]
            if left:
                err_console.print(f"not run: {', '.join(left)}")
            return INTERRUPTED
        if scale is None:
            scale = fitted_trace_scale(root / leg.study)
    return 0


def fitted_trace_scale(study_dir: Path) -> float | None:
    """The trace length scale a finished study ran with (its results.json), so every backend of
    a comparison replays the same requests: a second probe, of another server, would size them
    otherwise. None: no trace, or no results."""
    try:
        workload = json.loads((study_dir / "results.json").read_text())["spec"]["workload"]
    except (OSError, ValueError, KeyError):
        return None
    return float(workload.get("trace_length_scale", 1.0)) if workload.get("trace") else None
